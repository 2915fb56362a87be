package images

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	ctrimages "github.com/containerd/containerd/v2/core/images"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

var amd64 = ocispec.Platform{OS: "linux", Architecture: "amd64"}

func TestInspect(t *testing.T) {
	app := newImage(t, "app", "amd64")
	arm := newImage(t, "arm", "arm64")
	refName := ocispec.AnnotationRefName
	ctrName := ctrimages.AnnotationImageName
	appOCI := ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, refName, "example.com/app:1.0")}, app.blobs()...)
	appDocker := dockerSave(t, "app", "amd64", []string{"app:1.0"})

	// A multi-platform index: amd64 and arm64 manifests, the arm64 blobs left out as a
	// single-platform export does.
	amd64Desc, armDesc := app.manifestDesc, arm.manifestDesc
	amd64Desc.Platform, armDesc.Platform = &amd64, &ocispec.Platform{OS: "linux", Architecture: "arm64"}
	multi := mustJSON(t, ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{amd64Desc, armDesc}})
	multiDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(multi), Size: int64(len(multi))}
	armOnly := mustJSON(t, ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{armDesc}})
	armOnlyDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(armOnly), Size: int64(len(armOnly))}

	layerPath := blobFile(app.layer).name
	configPath := blobFile(app.config).name
	sized := app.manifestDesc
	sized.Size++
	asIndex := app.manifestDesc
	asIndex.MediaType = ocispec.MediaTypeImageIndex
	appTar := tarOf(t, appOCI...)
	junk := bytes.Repeat([]byte("this is not a tar archive\n"), 40)
	sharedLayer := dockerSave(t, "app", "amd64", []string{"app:1.0"})
	sharedLayer = append(replace(sharedLayer, "0123abcd/layer.tar", nil), tfile{name: "feed/layer.tar", data: layerTar(t, "app")},
		tfile{name: "0123abcd/layer.tar", link: "../feed/layer.tar"})

	tests := []struct {
		name    string
		archive []byte
		want    []string // the images' names; nil when an error is expected
		format  string
		gzip    bool
		wantErr string
	}{
		{name: "oci layout", archive: appTar, want: []string{"example.com/app:1.0"}, format: FormatOCI},
		{name: "oci layout, gzip", archive: gzipped(t, appTar), want: []string{"example.com/app:1.0"}, format: FormatOCI, gzip: true},
		{name: "docker save", archive: tarOf(t, appDocker...), want: []string{"docker.io/library/app:1.0"}, format: FormatDocker},
		{name: "docker save, gzip", archive: gzipped(t, tarOf(t, appDocker...)), want: []string{"docker.io/library/app:1.0"}, format: FormatDocker, gzip: true},
		{name: "docker save, two tags", archive: tarOf(t, dockerSave(t, "app", "amd64", []string{"app:1.0", "example.com/app:latest"})...),
			want: []string{"docker.io/library/app:1.0", "example.com/app:latest"}, format: FormatDocker},
		{name: "docker save, shared layer as a symbolic link", archive: tarOf(t, sharedLayer...), want: []string{"docker.io/library/app:1.0"}, format: FormatDocker},
		{name: "both: the OCI layout wins, as in containerd",
			archive: tarOf(t, append(appOCI, tfile{name: "manifest.json", data: []byte(`[]`)})...), want: []string{"example.com/app:1.0"}, format: FormatOCI},
		{name: "oci short ref name is normalised", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, refName, "app:1.0")}, app.blobs()...)...),
			want: []string{"docker.io/library/app:1.0"}, format: FormatOCI},
		{name: "oci containerd name wins over the ref name", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, refName, "1.0", ctrName, "example.com/app:1.0")}, app.blobs()...)...),
			want: []string{"example.com/app:1.0"}, format: FormatOCI},
		{name: "oci multi-platform index, only amd64 blobs", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(multiDesc, refName, "example.com/app:1.0")},
			append(app.blobs(), blobFile(multi))...)...), want: []string{"example.com/app:1.0"}, format: FormatOCI},
		{name: "oci unnamed entry besides a named one", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{app.manifestDesc, named(app.manifestDesc, refName, "example.com/app:1.0")}, app.blobs()...)...),
			want: []string{"example.com/app:1.0"}, format: FormatOCI},

		{name: "empty", archive: nil, wantErr: "the archive is empty (0 bytes)"},
		{name: "not a tar", archive: junk, wantErr: "not a tar archive (nor a gzip-compressed one)"},
		{name: "too short for a tar", archive: []byte("hello"), wantErr: "not a tar archive, or one truncated at byte 5"},
		{name: "gzip of no tar", archive: gzipped(t, junk), wantErr: "not a tar archive: the gzip stream does not hold a tar archive"},
		{name: "zstd", archive: []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0}, wantErr: "zstd-compressed"},
		{name: "no files", archive: tarOf(t), wantErr: "the archive holds no files"},
		{name: "neither format", archive: tarOf(t, tfile{name: "README", data: []byte("hi")}), wantErr: `neither an OCI image layout (oci-layout and index.json) nor a docker save archive (manifest.json); it holds "README"`},
		{name: "index.json without oci-layout", archive: tarOf(t, replace(appOCI, "oci-layout", nil)...), wantErr: "index.json but no oci-layout"},
		{name: "oci-layout of another version", archive: tarOf(t, replace(appOCI, "oci-layout", []byte(`{"imageLayoutVersion":"2.0.0"}`))...), wantErr: `imageLayoutVersion "2.0.0"`},
		{name: "oci no index.json", archive: tarOf(t, replace(appOCI, "index.json", nil)...), wantErr: "no index.json"},
		{name: "index.json not JSON", archive: tarOf(t, replace(appOCI, "index.json", []byte("{nope"))...), wantErr: "index.json is not valid JSON"},
		{name: "oci missing layer", archive: tarOf(t, replace(appOCI, layerPath, nil)...),
			wantErr: fmt.Sprintf("manifest %s names layer %s which the archive lacks", app.manifestDesc.Digest, digest.FromBytes(app.layer))},
		{name: "oci missing manifest", archive: tarOf(t, replace(appOCI, blobFile(app.manifest).name, nil)...),
			wantErr: fmt.Sprintf("index.json names manifest %s which the archive lacks", app.manifestDesc.Digest)},
		{name: "oci missing config", archive: tarOf(t, replace(appOCI, configPath, nil)...), wantErr: "names config " + digest.FromBytes(app.config).String() + " which the archive lacks"},
		{name: "oci blob with the wrong digest", archive: tarOf(t, replace(appOCI, layerPath, gzipped(t, layerTar(t, "evil")))...),
			wantErr: fmt.Sprintf("blob %s has digest %s", digest.FromBytes(app.layer), digest.FromBytes(gzipped(t, layerTar(t, "evil"))))},
		{name: "oci blob of the wrong size", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(sized, refName, "example.com/app:1.0")}, app.blobs()...)...),
			wantErr: fmt.Sprintf("blob %s is %d bytes, but index.json says its manifest is %d", app.manifestDesc.Digest, len(app.manifest), len(app.manifest)+1)},
		{name: "oci manifest referenced as an index", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(asIndex, refName, "example.com/app:1.0")}, app.blobs()...)...),
			wantErr: fmt.Sprintf("index.json names %s as an index (%s), but the blob is a manifest", app.manifestDesc.Digest, ocispec.MediaTypeImageIndex)},
		{name: "oci no name", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{app.manifestDesc}, app.blobs()...)...), wantErr: "no image in the archive has a name"},
		{name: "oci ref name only a tag", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, refName, "latest")}, app.blobs()...)...),
			wantErr: `"latest" is only a tag or a bare name`},
		{name: "oci containerd name not normalised", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, ctrName, "app:1.0")}, app.blobs()...)...),
			wantErr: "the kubelet would look for docker.io/library/app:1.0"},
		{name: "oci arm64 only (platform in index.json)", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(armDesc, refName, "example.com/arm:1.0")}, arm.blobs()...)...),
			wantErr: "image example.com/arm:1.0 is for linux/arm64 only; this node runs linux/amd64"},
		{name: "oci arm64 only (platform in the config)", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(arm.manifestDesc, refName, "example.com/arm:1.0")}, arm.blobs()...)...),
			wantErr: "image example.com/arm:1.0 has no manifest for linux/amd64"},
		{name: "oci index without amd64", archive: tarOf(t, ociLayout(t, []ocispec.Descriptor{named(armOnlyDesc, refName, "example.com/arm:1.0")}, append(arm.blobs(), blobFile(armOnly))...)...),
			wantErr: "image example.com/arm:1.0 has no manifest for linux/amd64"},
		{name: "docker missing layer", archive: tarOf(t, replace(appDocker, "0123abcd/layer.tar", nil)...), wantErr: "manifest.json names layer 0123abcd/layer.tar which the archive lacks"},
		{name: "docker missing config", archive: tarOf(t, appDocker[1:]...), wantErr: "manifest.json names config " + appDocker[0].name + " which the archive lacks"},
		{name: "docker layer not the config's diff ID", archive: tarOf(t, replace(appDocker, "0123abcd/layer.tar", layerTar(t, "evil"))...),
			wantErr: fmt.Sprintf("layer 0123abcd/layer.tar has digest %s, but the image's config", digest.FromBytes(layerTar(t, "evil")))},
		{name: "docker config with the wrong digest", archive: tarOf(t, replace(appDocker, appDocker[0].name, []byte(`{"os":"linux"}`))...),
			wantErr: "config " + appDocker[0].name + " has digest " + digest.FromBytes([]byte(`{"os":"linux"}`)).String()},
		{name: "docker no tags", archive: tarOf(t, dockerSave(t, "app", "amd64", nil)...), wantErr: "RepoTags are empty"},
		{name: "docker bad tag", archive: tarOf(t, dockerSave(t, "app", "amd64", []string{"App:UPPER case"})...), wantErr: `RepoTag "App:UPPER case" is not an image reference`},
		{name: "docker arm64", archive: tarOf(t, dockerSave(t, "app", "arm64", []string{"app:1.0"})...), wantErr: "image docker.io/library/app:1.0 is for linux/arm64; this node runs linux/amd64"},
		{name: "docker dangling symbolic link", archive: tarOf(t, append(appDocker, tfile{name: "x/layer.tar", link: "../gone/layer.tar"})...),
			wantErr: "symbolic link x/layer.tar points to gone/layer.tar, which the archive lacks"},
		{name: "docker manifest.json lists nothing", archive: tarOf(t, tfile{name: "manifest.json", data: []byte(`[]`)}), wantErr: "manifest.json lists no images"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Inspect(bytes.NewReader(tc.archive), amd64)
			if tc.wantErr != "" {
				var ae *ArchiveError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Inspect() = %v, %v; want an error with %q", a, err, tc.wantErr)
				}
				if !asArchiveError(err, &ae) {
					t.Errorf("Inspect() = %T %v, want an *ArchiveError", err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Inspect() = %v", err)
			}
			if !slices.Equal(a.Names(), tc.want) || a.Format != tc.format || a.Gzip != tc.gzip {
				t.Errorf("Inspect() = %v (%s, gzip %t), want %v (%s, gzip %t)", a.Names(), a.Format, a.Gzip, tc.want, tc.format, tc.gzip)
			}
		})
	}
}

// A truncated archive names the byte where it ends and the file it cuts short, uncompressed or not.
func TestInspectTruncated(t *testing.T) {
	app := newImage(t, strings.Repeat("a large enough layer ", 200), "amd64")
	full := tarOf(t, ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, ocispec.AnnotationRefName, "example.com/app:1.0")}, app.blobs()...)...)
	for _, cut := range []int{len(full) / 2, len(full) - 1536, 700} {
		t.Run(fmt.Sprintf("plain at %d", cut), func(t *testing.T) {
			_, err := Inspect(bytes.NewReader(full[:cut]), amd64)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("archive truncated at byte %d", cut)) {
				t.Fatalf("Inspect(first %d of %d bytes) = %v, want it truncated at byte %d", cut, len(full), err, cut)
			}
		})
	}
	gz := gzipped(t, full)
	cut := len(gz) * 2 / 3
	_, err := Inspect(bytes.NewReader(gz[:cut]), amd64)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("archive truncated at byte %d", cut)) {
		t.Fatalf("Inspect(first %d of %d gzip bytes) = %v, want it truncated at byte %d", cut, len(gz), err, cut)
	}
	// Cut right after a file, where Go's tar reader sees a clean end: the missing end-of-archive marker
	// tells.
	files := ociLayout(t, []ocispec.Descriptor{named(app.manifestDesc, ocispec.AnnotationRefName, "example.com/app:1.0")}, app.blobs()...)
	partial := tarOf(t, files[:3]...)
	cut = len(partial) - 1024
	_, err = Inspect(bytes.NewReader(partial[:cut]), amd64)
	want := fmt.Sprintf("archive truncated at byte %d: it ends after %s without the tar end-of-archive marker", cut, files[2].name)
	if err == nil || err.Error() != want {
		t.Fatalf("Inspect(archive cut after a file) = %v, want %q", err, want)
	}
}

func asArchiveError(err error, target **ArchiveError) bool {
	ae, ok := err.(*ArchiveError)
	if ok {
		*target = ae
	}
	return ok
}
