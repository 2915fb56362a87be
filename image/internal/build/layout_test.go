package build

import (
	"archive/tar"
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/payload/payloadtest"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/image/internal/initramfs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

func TestInitramfsLayout(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	initBin := write("init", "#init binary#")
	root := write("rootfs.squashfs", "squashfs image bytes")
	machined := write("machined.squashfs", "machined image bytes")
	mods := []string{"kernel/drivers/block/loop.ko", "kernel/fs/squashfs/squashfs.ko"}
	for _, m := range mods {
		write("modules/"+m, "module "+m)
	}
	tr, err := InitramfsTree(initBin, root, machined, "6.1.0-test", filepath.Join(dir, "modules"), mods)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := initramfs.WriteCPIO(&a, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := initramfs.WriteCPIO(&b, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("WriteCPIO() twice gave different archives")
	}
	listing, err := initramfs.List(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "initramfs.golden", listing)
}

func writeTestFile(t *testing.T, p, content string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The upgrade bundle is what api/upgrade reads, member by member, and the same bytes every build.
func TestUpgradeBundle(t *testing.T) {
	dir := t.TempDir()
	uki := writeTestFile(t, filepath.Join(dir, UKIName), "the UKI")
	pl := writeTestFile(t, filepath.Join(dir, PayloadImage), "the payload image")
	out := filepath.Join(dir, UpgradeBundle)
	var tars [2][]byte
	for i := range tars {
		if err := WriteBundle(out, "v9.9.9-test", uki, pl, nil, 1700000000, t.Logf); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		tars[i] = b
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Errorf("two bundles of the same files differ")
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("WriteBundle left its temporary file: %v", err)
	}
	r, err := upgrade.NewReader(bytes.NewReader(tars[0]))
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Manifest; m.Version != "v9.9.9-test" || m.Kubernetes != config.KubernetesVersion {
		t.Errorf("manifest = %+v, want version v9.9.9-test and Kubernetes %s", m, config.KubernetesVersion)
	}
	// Read the members in the order the bundle has them (api/upgrade decides it), each checked against
	// the manifest.
	content := map[string]string{upgrade.UKIName: "the UKI", upgrade.PayloadName: "the payload image"}
	sums := map[string]payload.Sum{upgrade.UKIName: r.Manifest.UKI, upgrade.PayloadName: r.Manifest.Payload}
	tr := tar.NewReader(bytes.NewReader(tars[0]))
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != upgrade.ManifestName {
			order = append(order, h.Name)
		}
	}
	if len(order) != len(content) {
		t.Fatalf("bundle members %v, want %d besides the manifest", order, len(content))
	}
	for _, name := range order {
		m, err := r.Next(name, sums[name])
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content[name] {
			t.Errorf("member %s = %q, want %q", name, got, content[name])
		}
	}
}

// -payload-image: the image lands in Out, its sum is what the root image records, and Out's pack
// stamp goes, so a later build from the bundle packs again instead of trusting the imported image.
func TestImportPayload(t *testing.T) {
	other, out := t.TempDir(), t.TempDir()
	img, want := payloadtest.Image(3, "another build's payload")
	src := writeTestFile(t, filepath.Join(other, PayloadImage), string(img))
	writeTestFile(t, filepath.Join(out, PayloadImage), "this build's old payload")
	writeTestFile(t, filepath.Join(out, PayloadImage+".stamp"), "tree hash")
	b := &builder{Config: Config{Out: out, PayloadImage: src}}
	if err := b.payload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.payloadSum != want.String() {
		t.Errorf("payloadSum = %q, want %q", b.payloadSum, want)
	}
	if got, err := os.ReadFile(b.payloadImage()); err != nil || string(got) != string(img) {
		t.Errorf("%s = %q, %v; want the imported image", b.payloadImage(), got, err)
	}
	if _, err := os.Stat(filepath.Join(out, PayloadImage+".stamp")); !os.IsNotExist(err) {
		t.Errorf("the pack stamp is still there: %v", err)
	}
	// Given Out's own image, it is left as it is.
	b = &builder{Config: Config{Out: out, PayloadImage: filepath.Join(out, PayloadImage)}}
	if err := b.payload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.payloadSum != want.String() {
		t.Errorf("payloadSum of Out's own image = %q, want %q", b.payloadSum, want)
	}
}

func TestArtifactsIncludeUpgrade(t *testing.T) {
	for _, name := range []string{UKIName, UpgradeBundle} {
		if !slices.Contains(Artifacts, name) {
			t.Errorf("Artifacts lacks %s: repro-check would not compare it", name)
		}
	}
	if UKIName != upgrade.UKIName {
		t.Errorf("UKIName = %q, the bundle's member is %q", UKIName, upgrade.UKIName)
	}
}
