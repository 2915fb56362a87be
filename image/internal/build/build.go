// Package build runs the image pipeline behind `make image`: kernel, modules, root image, initramfs,
// UKI, ISO, raw disk and upgrade bundle, each step printing a progress line, with every output
// reproducible from its inputs.
package build

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/image/internal/boot"
	"github.com/cairn-os/cairn/image/internal/initramfs"
	"github.com/cairn-os/cairn/image/internal/kernel"
	"github.com/cairn-os/cairn/image/internal/kmod"
	"github.com/cairn-os/cairn/image/internal/payload"
	"github.com/cairn-os/cairn/image/internal/rootfs"
	"github.com/cairn-os/cairn/image/internal/tree"
)

// Config are the inputs and outputs of one build.
type Config struct {
	Out       string // output directory, _out
	Machined  string // the machined binary, _out/machined
	Init      string // a prebuilt init binary; empty builds ./init into Out/init
	BundleDir string // _out/bundle; absent means no Kubernetes
	// PayloadImage is a payload image made by another build, used instead of packing BundleDir: an image
	// that differs from that build only in its boot part (version, machined) is built in seconds.
	PayloadImage string
	// SignKey is the PEM file of the Ed25519 key that signs the upgrade bundle ("": unsigned).
	SignKey string
	// PayloadOnly stages the payload tree (Out/payload, what sandbox mode runs from) and stops.
	PayloadOnly bool
	Epoch       int64  // SOURCE_DATE_EPOCH: every timestamp in every artifact
	Version     string // for os-release
	Cmdline     string // kernel command line baked into the ISO and the raw disk
	HostRoot    string // "/": where the tools (and, without KernelRoot, the kernel and modules) are taken from
	// KernelRoot is where the kernel and its modules are taken from (its boot/vmlinuz-VERSION and
	// lib/modules/VERSION), when not from HostRoot: a kernel built by `make kernel`.
	KernelRoot string
	ISO, Raw   bool  // build _out/cairn.iso, _out/cairn.raw
	RawSize    int64 // size of cairn.raw in bytes
	Log        io.Writer
}

// Artifact names inside Out.
const (
	Vmlinuz   = "vmlinuz"
	Vmlinux   = "vmlinux"
	InitBin   = "init"
	RootImage = "rootfs.squashfs"
	// MachinedImage holds machined alone, packed apart from the root image (rootfs/pack.go says why).
	MachinedImage = "machined.squashfs"
	// Payload is the Kubernetes payload's tree and PayloadImage its packed image (api/payload).
	Payload      = "payload"
	PayloadImage = "payload.squashfs"
	// PayloadPlain is the same tree packed uncompressed, for the raw disk's slot A (payload.Config.Plain):
	// the raw disk's download is compressed whole.
	PayloadPlain = "payload-plain.squashfs"
	// PayloadStream is PayloadPlain as one zstd stream, which the ISO carries (api/payload.ISOStream).
	PayloadStream = "payload-plain.squashfs.zst"
	// Initramfs is the boot part: init and the root image. The payload is not in it: it travels on the
	// boot medium (api/payload's Medium), so the kernel unpacks only what the first seconds need.
	Initramfs = "initramfs.cpio.zst"
	ISOName   = "cairn.iso"
	RawName   = "cairn.raw"
	// GCEName is the raw disk packed as Compute Engine imports an image (boot.GCETarball).
	GCEName = "cairn-gce.tar.gz"
	// UKIName is the unified kernel image (kernel, initramfs, command line): the raw disk's first boot
	// entry, and the one the upgrade bundle carries.
	UKIName = "cairn.efi"
	// UpgradeBundle is the upgrade bundle (api/upgrade): the UKI and the payload image with a manifest.
	UpgradeBundle = "cairn-upgrade.tar"
)

type builder struct {
	Config
	k          kernel.Kernel
	ix         *kmod.Index
	initMods   []string
	rootMods   []string // the root image's load list
	reqMods    []string // shipped beside it for the kernel's requests alone (RequestModules)
	payloadSum string   // what the root image records (api/payload.Records); "" without a bundle
	plain      bool     // this build packed PayloadPlain, which payloadSum records too
}

// Run builds every artifact and prints their sizes.
func Run(ctx context.Context, c Config) error {
	b := &builder{Config: c}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	if c.PayloadOnly {
		return payload.Stage(b.payloadConfig(), b.logf)
	}
	// on is asked when the step's turn comes: whether there is a payload image is known only after the
	// payload step.
	always := func() bool { return true }
	hasPayload := func() bool { return b.payloadImage() != "" }
	steps := []struct {
		name string
		run  func(context.Context) error
		on   func() bool
	}{
		{"kernel", b.kernel, always},
		{"init", b.init, always},
		{"modules", b.modules, always},
		{"payload", b.payload, always},
		{"rootfs", b.rootfs, always},
		{"initramfs", b.initramfs, always},
		{"uki", b.uki, func() bool { return c.Raw || hasPayload() }},
		{"iso", b.iso, func() bool { return c.ISO }},
		{"raw", b.raw, func() bool { return c.Raw }},
		{"gce", b.gce, func() bool { return c.Raw }},
		{"bundle", b.bundle, hasPayload},
	}
	total := time.Now()
	for _, s := range steps {
		if !s.on() {
			continue
		}
		start := time.Now()
		b.logf("[%s] ...", s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.logf("[%s] done in %v", s.name, time.Since(start).Round(time.Millisecond))
	}
	b.logf("built in %v (SOURCE_DATE_EPOCH=%d, version %s):", time.Since(total).Round(time.Millisecond), c.Epoch, c.Version)
	for _, name := range []string{Vmlinuz, Vmlinux, InitBin, RootImage, MachinedImage, PayloadImage, PayloadPlain, PayloadStream, Initramfs, UKIName, ISOName, RawName, GCEName, UpgradeBundle} {
		p := filepath.Join(c.Out, name)
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		b.logf("  %-20s %s", name, sizeString(p, fi))
	}
	return nil
}

func (b *builder) logf(format string, a ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, "mkimage: "+format+"\n", a...)
	}
}

func (b *builder) out(name string) string { return filepath.Join(b.Out, name) }

func (b *builder) kernel(ctx context.Context) error {
	root := cmp.Or(b.KernelRoot, b.HostRoot)
	k, err := kernel.Find(root)
	if err != nil && root == "/" && os.Geteuid() == 0 {
		b.logf("[kernel] %v; installing linux-image-amd64", err)
		for _, a := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "linux-image-amd64"}} {
			cmd := exec.CommandContext(ctx, "apt-get", a...)
			cmd.Stdout, cmd.Stderr = b.Log, b.Log
			if ierr := cmd.Run(); ierr != nil {
				return fmt.Errorf("apt-get %s: %w", a[0], ierr)
			}
		}
		k, err = kernel.Find(root)
	}
	if err != nil {
		return err
	}
	b.k = k
	bz, err := os.ReadFile(k.Image)
	if err != nil {
		return err
	}
	if err := writeFile(b.out(Vmlinuz), bz, b.Epoch); err != nil {
		return err
	}
	vmlinux, err := kernel.ExtractVmlinux(bz)
	if err != nil {
		return fmt.Errorf("%s: %w", k.Image, err)
	}
	b.logf("[kernel] %s: extracted %d-byte PVH vmlinux", k.Version, len(vmlinux))
	return writeFile(b.out(Vmlinux), vmlinux, b.Epoch)
}

// init builds the static init binary unless one was given. -trimpath and an empty build ID keep it
// byte-identical across builds and checkouts.
func (b *builder) init(ctx context.Context) error {
	if b.Init != "" {
		return nil
	}
	b.Init = b.out(InitBin)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", b.Init, "./init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./init: %w: %s", err, out)
	}
	return os.Chtimes(b.Init, time.Unix(b.Epoch, 0), time.Unix(b.Epoch, 0))
}

func (b *builder) modules(context.Context) error {
	ix, err := kmod.Load(b.k.Modules)
	if err != nil {
		return err
	}
	b.ix = ix
	if b.initMods, err = ix.Closure(InitModules); err != nil {
		return fmt.Errorf("initramfs modules: %w", err)
	}
	if b.rootMods, err = ix.Closure(RootfsModules); err != nil {
		return fmt.Errorf("rootfs modules: %w", err)
	}
	req, err := ix.Closure(RequestModules)
	if err != nil {
		return fmt.Errorf("modules for the kernel's requests: %w", err)
	}
	b.reqMods = slices.DeleteFunc(req, func(m string) bool { return slices.Contains(b.rootMods, m) })
	b.logf("[modules] initramfs: %d modules %v; rootfs: %d modules, and %d for the kernel's requests", len(b.initMods), names(b.initMods), len(b.rootMods), len(b.reqMods))
	return nil
}

func names(mods []string) []string {
	out := make([]string, len(mods))
	for i, m := range mods {
		out[i] = kmod.Name(m)
	}
	return out
}

func (b *builder) rootfs(ctx context.Context) error {
	if _, err := os.Stat(b.Machined); err != nil {
		return fmt.Errorf("machined binary: %w (build it first: make machined)", err)
	}
	aliases, err := b.aliases()
	if err != nil {
		return err
	}
	t, notes, err := rootfs.Build(rootfs.Config{
		Version:       b.Version,
		KernelVersion: b.k.Version,
		ModulesDir:    b.k.Modules,
		Modules:       b.rootMods,
		Requested:     b.reqMods,
		DepFile:       b.ix.DepFile(slices.Concat(b.rootMods, b.reqMods)),
		AliasFile:     aliases,
		PayloadSum:    b.payloadSum,
		Tools:         rootfs.DefaultTools,
		HostRoot:      b.HostRoot,
		HostFiles:     rootfs.DefaultHostFiles,
	})
	if err != nil {
		return err
	}
	for _, n := range notes {
		b.logf("[rootfs] note: %s", n)
	}
	if err := rootfs.Pack(ctx, t, b.out(".rootfs-stage"), b.out(RootImage), b.Epoch, rootfs.RootCompression); err != nil {
		return err
	}
	m, err := rootfs.MachinedTree(b.Machined)
	if err != nil {
		return err
	}
	return rootfs.Pack(ctx, m, b.out(".machined-stage"), b.out(MachinedImage), b.Epoch, rootfs.MachinedCompression)
}

func (b *builder) aliases() ([]byte, error) {
	f, err := os.Open(filepath.Join(b.k.Modules, "modules.alias"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kmod.FilterAliases(f, slices.Concat(b.rootMods, b.reqMods))
}

// InitramfsTree lays out the initramfs: /init, the console node the kernel opens for init's output,
// init's modules and their load list, the root image and the machined image.
func InitramfsTree(initBin, rootImage, machinedImage, kver, modulesDir string, mods []string) (*tree.Tree, error) {
	t := tree.New()
	steps := []error{
		t.Copy("/init", initBin, 0o755),
		t.Add(tree.Entry{Path: "/dev/console", Kind: tree.CharDev, Perm: 0o600, Dev: [2]uint32{5, 1}}),
		t.Copy("/"+RootImage, rootImage, 0o644),         // init's rootImage
		t.Copy("/"+MachinedImage, machinedImage, 0o644), // init's machinedImage
		t.Bytes("/lib/modules/"+kver+"/"+rootfs.LoadListName, kmod.LoadList(mods), 0o644),
	}
	for _, m := range mods {
		steps = append(steps, t.Copy("/lib/modules/"+kver+"/"+m, filepath.Join(modulesDir, m), 0o644))
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// storedImages travel in the initramfs as they are, outside its zstd: both are compressed squashfs images
// already, and the kernel would decompress the zstd over them at every boot (initramfs.Write says what
// that cost).
var storedImages = []string{"/" + RootImage, "/" + MachinedImage}

func (b *builder) initramfs(ctx context.Context) error {
	t, err := InitramfsTree(b.Init, b.out(RootImage), b.out(MachinedImage), b.k.Version, b.k.Modules, b.initMods)
	if err != nil {
		return err
	}
	if err := initramfs.Write(ctx, b.out(Initramfs), t, b.Epoch, storedImages...); err != nil {
		return err
	}
	return touch(b.out(Initramfs), b.Epoch)
}

// payloadConfig is where the payload is built from and to.
func (b *builder) payloadConfig() payload.Config {
	return payload.Config{Bundle: b.BundleDir, Dir: b.out(Payload), Image: b.out(PayloadImage), Epoch: b.Epoch}
}

// payload packs the bundle into the payload image (cached: an unchanged bundle is not packed again), or
// takes the one given.
func (b *builder) payload(ctx context.Context) error {
	if b.PayloadImage != "" {
		return b.importPayload()
	}
	if b.BundleDir == "" {
		b.logf("[payload] no bundle given: the image carries no Kubernetes")
		return nil
	}
	if _, err := os.Stat(b.BundleDir); os.IsNotExist(err) {
		b.logf("[payload] no Kubernetes bundle: %s does not exist (build it first to ship Kubernetes)", b.BundleDir)
		return nil
	}
	c := b.payloadConfig()
	if b.Raw || b.ISO {
		c.Plain = b.out(PayloadPlain)
	}
	rec, err := payload.Pack(ctx, c, b.logf)
	if err != nil {
		return err
	}
	b.payloadSum, b.plain = rec.String(), len(rec) > 1
	if b.plain && b.ISO {
		return payload.Stream(ctx, b.out(PayloadPlain), b.out(PayloadStream), rec[1], b.logf)
	}
	return nil
}

// importPayload puts the given payload image at Out's payload.squashfs (linked, or copied across file
// systems) and records its sum. Out's pack stamp goes: it described the tree the image there was packed
// from, and a later build from the bundle must pack again rather than trust a foreign image.
func (b *builder) importPayload() error {
	dst := b.out(PayloadImage)
	src, err := os.Stat(b.PayloadImage)
	if err != nil {
		return fmt.Errorf("-payload-image: %w", err)
	}
	if cur, err := os.Stat(dst); err != nil || !os.SameFile(src, cur) {
		if err := os.Remove(dst + ".stamp"); err != nil && !os.IsNotExist(err) {
			return err
		}
		tmp := dst + ".tmp"
		os.Remove(tmp)
		if err := os.Link(b.PayloadImage, tmp); err != nil {
			if err := copyFile(tmp, b.PayloadImage); err != nil {
				os.Remove(tmp)
				return err
			}
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	rec, err := payload.ReadRecord(dst)
	if err != nil {
		return fmt.Errorf("-payload-image: %w", err)
	}
	b.payloadSum = rec.String()
	b.logf("[payload] using %s (%s)", b.PayloadImage, human(rec.Size))
	return nil
}

// payloadImage is the payload image the boot media carry, "" for an image without Kubernetes.
func (b *builder) payloadImage() string {
	if b.payloadSum == "" {
		return ""
	}
	return b.out(PayloadImage)
}

// iso builds the ISO with the payload as one stream when this build packed the uncompressed image, which
// makes the ISO 17 MB smaller (stream.go in image/internal/payload), and with the compressed image
// otherwise (a build from -payload-image).
func (b *builder) iso(ctx context.Context) error {
	c := boot.ISOConfig{Kernel: b.out(Vmlinuz), Initramfs: b.out(Initramfs), Payload: b.payloadImage(), Cmdline: b.Cmdline,
		Out: b.out(ISOName), Work: b.out(".iso-work"), Epoch: b.Epoch}
	if b.plain {
		c.Payload, c.PayloadStream = "", b.out(PayloadStream)
	}
	return boot.ISO(ctx, c)
}

// uki builds the unified kernel image once, for the raw disk and the upgrade bundle.
func (b *builder) uki(ctx context.Context) error {
	return boot.BuildUKI(ctx, boot.UKIConfig{
		Kernel: b.out(Vmlinuz), Initramfs: b.out(Initramfs), Cmdline: b.Cmdline, Version: b.Version,
		Out: b.out(UKIName), Epoch: b.Epoch,
	})
}

// raw builds the raw disk with the uncompressed payload in slot A when this build packed one: the disk is
// downloaded compressed whole (`zstd --long`), which packs the uncompressed payload smaller than the
// squashfs's own compression (docs/figures.md, 2026-12-07).
func (b *builder) raw(ctx context.Context) error {
	pay := b.payloadImage()
	if b.plain {
		pay = b.out(PayloadPlain)
	}
	return b.rawDisk(ctx, pay, b.out(RawName))
}

func (b *builder) rawDisk(ctx context.Context, pay, out string) error {
	return boot.Raw(ctx, boot.RawConfig{
		UKI: b.out(UKIName), Payload: pay, Version: b.Version,
		Out: out, Work: b.out(".raw-work"), Epoch: b.Epoch, Size: b.RawSize,
	})
}

// gce packs the raw disk for Compute Engine: the one platform whose image import needs its own packaging.
// Its tarball is gzipped, whose 32 KiB window shares nothing across binaries, so its disk carries the
// compressed payload, as the ISO does: a disk of its own when the raw disk carries the uncompressed one.
func (b *builder) gce(ctx context.Context) error {
	if !b.plain {
		return boot.GCETarball(ctx, b.out(RawName), b.out(GCEName), b.Epoch)
	}
	dir := b.out(".gce-work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	disk := filepath.Join(dir, RawName)
	if err := b.rawDisk(ctx, b.payloadImage(), disk); err != nil {
		return err
	}
	return boot.GCETarball(ctx, disk, b.out(GCEName), b.Epoch)
}

// bundle packs the upgrade bundle. It is written beside its final name and renamed, so an interrupted
// build never leaves a truncated bundle that looks like a whole one.
func (b *builder) bundle(context.Context) error {
	var key ed25519.PrivateKey
	if b.SignKey != "" {
		data, err := os.ReadFile(b.SignKey)
		if err != nil {
			return err
		}
		if key, err = upgrade.ParsePrivateKey(data); err != nil {
			return fmt.Errorf("signing key %s: %w", b.SignKey, err)
		}
	}
	return WriteBundle(b.out(UpgradeBundle), b.Version, b.out(UKIName), b.payloadImage(), key, b.Epoch, b.logf)
}

// WriteBundle writes the upgrade bundle of a UKI and a payload image to out, signed with key unless nil.
func WriteBundle(out, version, uki, payloadImage string, key ed25519.PrivateKey, epoch int64, logf func(string, ...any)) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed
	m, err := upgrade.Write(f, version, config.KubernetesVersion, uki, payloadImage, key)
	if err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := touch(tmp, epoch); err != nil {
		return err
	}
	signed := "unsigned"
	if key != nil {
		signed = "signed"
	}
	logf("[bundle] %s: version %s, Kubernetes %s, UKI %s, payload %s, %s", filepath.Base(out), m.Version, m.Kubernetes, human(m.UKI.Size), human(m.Payload.Size), signed)
	return os.Rename(tmp, out)
}

// copyFile copies src to dst, a new file.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

func writeFile(p string, data []byte, epoch int64) error {
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	return touch(p, epoch)
}

func touch(p string, epoch int64) error {
	return os.Chtimes(p, time.Unix(epoch, 0), time.Unix(epoch, 0))
}

// sizeString prints the apparent size and, for sparse files, what they really use on disk.
func sizeString(p string, fi os.FileInfo) string {
	s := fmt.Sprintf("%10d bytes (%s)", fi.Size(), human(fi.Size()))
	if used, ok := diskUsage(p); ok && used < fi.Size()*9/10 {
		s += fmt.Sprintf(", %s allocated (sparse)", human(used))
	}
	return s
}

func human(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
