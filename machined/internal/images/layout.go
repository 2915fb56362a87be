package images

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// oci checks an OCI image layout the way containerd's importer and unpacker will read it: the index.json
// entries with a name become images (so each must be available for the platform), and every entry the
// platform filter lets through is walked, so its blobs must all be there.
func (s *scan) oci() ([]ArchiveImage, error) {
	var layout ocispec.ImageLayout
	if err := s.decode("oci-layout", "oci-layout", &layout); err != nil {
		return nil, err
	}
	if layout.Version != ocispec.ImageLayoutVersion {
		return nil, archiveErr("oci-layout: imageLayoutVersion %q is not %q, the version containerd reads", layout.Version, ocispec.ImageLayoutVersion)
	}
	if err := s.checkBlobNames(); err != nil {
		return nil, err
	}
	var index ocispec.Index
	if s.files["index.json"] == nil {
		return nil, archiveErr("the OCI image layout has no index.json")
	}
	if err := s.decode("index.json", "index.json", &index); err != nil {
		return nil, err
	}
	if len(index.Manifests) == 0 {
		return nil, archiveErr("index.json lists no images")
	}
	var named []ArchiveImage
	for i, d := range index.Manifests {
		where := fmt.Sprintf("index.json entry %d", i)
		name, err := ociName(d.Annotations, where)
		if err != nil {
			return nil, err
		}
		if d.Platform != nil && !s.platform.Match(*d.Platform) {
			if name != "" {
				return nil, archiveErr("image %s is for %s only; this node runs %s", name, platforms.Format(*d.Platform), s.want)
			}
			continue // an unnamed entry for another platform: containerd neither walks nor names it
		}
		found, err := s.walk(d, "index.json")
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue
		}
		if found == 0 {
			return nil, archiveErr("image %s has no manifest for %s", name, s.want)
		}
		named = append(named, ArchiveImage{Name: name, Digest: d.Digest.String()})
	}
	if len(named) == 0 {
		return nil, archiveErr("no image in the archive has a name: each index.json entry needs an %s (or %s) annotation with the image's full name, e.g. example.com/app:1.0",
			ocispec.AnnotationRefName, ctrimages.AnnotationImageName)
	}
	return named, nil
}

// ociName is the name containerd gives an index.json entry: io.containerd.image.name as it is, or the OCI
// ref name normalised (the import's ref translator does the same). A ref name that is only a tag would
// become an image named like "latest"; it is refused rather than guessed at.
func ociName(annotations map[string]string, where string) (string, error) {
	if name := annotations[ctrimages.AnnotationImageName]; name != "" {
		norm, err := normalize(name)
		if err != nil {
			return "", archiveErr("%s: %s %q is not an image reference: %v", where, ctrimages.AnnotationImageName, name, err)
		}
		if norm != name {
			return "", archiveErr("%s: %s %q is not a full reference (containerd keeps it as it is, and the kubelet would look for %s)",
				where, ctrimages.AnnotationImageName, name, norm)
		}
		return name, nil
	}
	ref := annotations[ocispec.AnnotationRefName]
	if ref == "" {
		return "", nil
	}
	if !strings.ContainsAny(ref, "/:@") {
		return "", archiveErr("%s: %s %q is only a tag or a bare name; name the image in full, e.g. example.com/app:%s", where, ocispec.AnnotationRefName, ref, ref)
	}
	norm, err := normalize(ref)
	if err != nil {
		return "", archiveErr("%s: %s %q is not an image reference: %v", where, ocispec.AnnotationRefName, ref, err)
	}
	return norm, nil
}

// RefName is the import's translation of an OCI ref name into the image's name: normalised like a docker
// archive's RepoTags (app:1.0 is docker.io/library/app:1.0, the name the kubelet asks for).
func RefName(ref string) string {
	if norm, err := normalize(ref); err == nil {
		return norm
	}
	return ref
}

func normalize(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", err
	}
	return named.String(), nil
}

// walk follows a descriptor like containerd's import walk (children of an index filtered by platform) and
// checks every blob on the way. It returns how many manifests for the platform it found.
func (s *scan) walk(d ocispec.Descriptor, from string) (int, error) {
	switch {
	case ctrimages.IsIndexType(d.MediaType):
		var idx ocispec.Index
		if err := s.document(d, from, "index", &idx); err != nil {
			return 0, err
		}
		found := 0
		for _, c := range idx.Manifests {
			if c.Platform != nil && !s.platform.Match(*c.Platform) {
				continue
			}
			n, err := s.walk(c, "index "+d.Digest.String())
			if err != nil {
				return 0, err
			}
			found += n
		}
		return found, nil
	case ctrimages.IsManifestType(d.MediaType):
		var m ocispec.Manifest
		if err := s.document(d, from, "manifest", &m); err != nil {
			return 0, err
		}
		me := "manifest " + d.Digest.String()
		var cfg ocispec.Image
		if err := s.document(m.Config, me, "config", &cfg); err != nil {
			return 0, err
		}
		for _, l := range m.Layers {
			if _, err := s.blob(l, me, "layer"); err != nil {
				return 0, err
			}
		}
		p := d.Platform
		if p == nil {
			if cfg.OS == "" || cfg.Architecture == "" {
				return 0, archiveErr("config %s names no platform (os and architecture)", m.Config.Digest)
			}
			p = &cfg.Platform
		}
		if !s.platform.Match(platforms.Normalize(*p)) {
			return 0, nil
		}
		return 1, nil
	case d.MediaType == "":
		return 0, archiveErr("%s names %s without a media type", from, d.Digest)
	}
	return 0, archiveErr("%s names %s of media type %q, neither an image index nor a manifest", from, d.Digest, d.MediaType)
}

// blob finds a descriptor's blob and checks its size; its digest was checked against its name already.
func (s *scan) blob(d ocispec.Descriptor, from, kind string) (*entry, error) {
	if err := d.Digest.Validate(); err != nil {
		return nil, archiveErr("%s names %s %q, which is not a valid digest: %v", from, kind, d.Digest, err)
	}
	if d.Digest.Algorithm() != digest.SHA256 {
		return nil, archiveErr("%s names %s %s: only sha256 digests are supported", from, kind, d.Digest)
	}
	e := s.files["blobs/sha256/"+d.Digest.Encoded()]
	if e == nil {
		return nil, archiveErr("%s names %s %s which the archive lacks", from, kind, d.Digest)
	}
	if e.size != d.Size {
		return nil, archiveErr("blob %s is %d bytes, but %s says its %s is %d", d.Digest, e.size, from, kind, d.Size)
	}
	return e, nil
}

// document finds a JSON blob, checks it and decodes it.
func (s *scan) document(d ocispec.Descriptor, from, kind string, v any) error {
	e, err := s.blob(d, from, kind)
	if err != nil {
		return err
	}
	if err := s.decodeEntry(e, fmt.Sprintf("%s %s", kind, d.Digest), v); err != nil {
		return err
	}
	// A document's own kind must agree with the descriptor's: containerd checks it while unpacking.
	var doc struct {
		MediaType string          `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
		Config    json.RawMessage `json:"config"`
	}
	_ = json.Unmarshal(e.doc, &doc)
	switch {
	case ctrimages.IsManifestType(d.MediaType) && (doc.Manifests != nil || ctrimages.IsIndexType(doc.MediaType)):
		return archiveErr("%s names %s as a manifest (%s), but the blob is an index", from, d.Digest, d.MediaType)
	case ctrimages.IsIndexType(d.MediaType) && (doc.Config != nil || ctrimages.IsManifestType(doc.MediaType)):
		return archiveErr("%s names %s as an index (%s), but the blob is a manifest", from, d.Digest, d.MediaType)
	}
	return nil
}

func (s *scan) decode(name, what string, v any) error {
	e := s.files[name]
	if e == nil {
		return archiveErr("the archive lacks %s", name)
	}
	return s.decodeEntry(e, what, v)
}

func (s *scan) decodeEntry(e *entry, what string, v any) error {
	if e.doc == nil {
		if e.size > maxDocument {
			return archiveErr("%s is %d bytes, more than the %d MiB an image document may have", what, e.size, maxDocument>>20)
		}
		return archiveErr("%s is not JSON", what)
	}
	if err := json.Unmarshal(e.doc, v); err != nil {
		return archiveErr("%s is not valid JSON: %v", what, err)
	}
	return nil
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkBlobNames checks every blob of an OCI layout against the digest its path names.
func (s *scan) checkBlobNames() error {
	for _, name := range s.order {
		hex, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok || !hex64.MatchString(hex) {
			continue
		}
		if got := s.files[name].digest; got.Encoded() != hex {
			return archiveErr("blob sha256:%s has digest %s", hex, got)
		}
	}
	return nil
}

// dockerManifest is one image of a docker archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// docker checks a `docker save` archive the way containerd's importer reads it: manifest.json names each
// image's config and layer files (symbolic links allowed, as older Docker versions wrote for shared
// layers) and its RepoTags, which become the images' names.
func (s *scan) docker() ([]ArchiveImage, error) {
	var mfsts []dockerManifest
	if err := s.decode("manifest.json", "manifest.json", &mfsts); err != nil {
		return nil, err
	}
	if len(mfsts) == 0 {
		return nil, archiveErr("manifest.json lists no images")
	}
	for link, target := range s.symlinks {
		if s.files[target] == nil {
			return nil, archiveErr("the archive's symbolic link %s points to %s, which the archive lacks", link, target)
		}
	}
	var named []ArchiveImage
	for i, m := range mfsts {
		cfgEntry, cfgName, err := s.dockerFile(m.Config, "config")
		if err != nil {
			return nil, err
		}
		var cfg ocispec.Image
		if err := s.decodeEntry(cfgEntry, "config "+cfgName, &cfg); err != nil {
			return nil, err
		}
		if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
			return nil, archiveErr("manifest.json entry %d names %d layers, but its config %s lists %d (rootfs.diff_ids)", i, len(m.Layers), cfgName, len(cfg.RootFS.DiffIDs))
		}
		for j, l := range m.Layers {
			e, name, err := s.dockerFile(l, "layer")
			if err != nil {
				return nil, err
			}
			// An uncompressed layer's digest is its diff ID; a compressed one is checked when unpacked.
			if !compressed(e.head) && e.digest != cfg.RootFS.DiffIDs[j] {
				return nil, archiveErr("layer %s has digest %s, but the image's config %s expects %s", name, e.digest, cfgName, cfg.RootFS.DiffIDs[j])
			}
		}
		var names []string
		for _, tag := range m.RepoTags {
			norm, err := normalize(tag)
			if err != nil {
				return nil, archiveErr("manifest.json entry %d: RepoTag %q is not an image reference: %v", i, tag, err)
			}
			names = append(names, norm)
		}
		if len(names) > 0 && (cfg.OS == "" || cfg.Architecture == "") {
			return nil, archiveErr("image %s: its config %s names no platform (os and architecture)", names[0], cfgName)
		}
		if len(names) > 0 && !s.platform.Match(platforms.Normalize(cfg.Platform)) {
			return nil, archiveErr("image %s is for %s; this node runs %s", names[0], platforms.Format(platforms.Normalize(cfg.Platform)), s.want)
		}
		for _, n := range names {
			named = append(named, ArchiveImage{Name: n})
		}
	}
	if len(named) == 0 {
		return nil, archiveErr("no image in the archive has a name: manifest.json's RepoTags are empty (save the image by its name, e.g. docker save app:1.0, not by its ID)")
	}
	return named, nil
}

// dockerFile finds a file manifest.json names, following a symbolic link, and checks a digest its name
// carries (sha256:HEX, HEX.json, HEX.tar, HEX.tar.gz, blobs/sha256/HEX).
func (s *scan) dockerFile(name, kind string) (*entry, string, error) {
	clean := path.Clean(name)
	target := clean
	if t, ok := s.symlinks[clean]; ok {
		target = t
	}
	e := s.files[target]
	if e == nil {
		return nil, "", archiveErr("manifest.json names %s %s which the archive lacks", kind, name)
	}
	base := strings.TrimPrefix(path.Base(target), "sha256:")
	for _, ext := range []string{".json", ".tar.gz", ".tar.zst", ".tar"} {
		base = strings.TrimSuffix(base, ext)
	}
	if hex64.MatchString(base) && e.digest.Encoded() != base {
		return nil, "", archiveErr("%s %s has digest %s, not the sha256:%s its name says", kind, name, e.digest, base)
	}
	return e, name, nil
}

// compressed reports whether a layer starts with gzip's or zstd's magic, the compressions containerd
// unpacks; anything else it applies as a plain tar.
func compressed(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b ||
		len(head) >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd
}
