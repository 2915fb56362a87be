package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newImage(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Import, list and remove the container images of the node's Kubernetes",
		Long: `image manages the container images in containerd's k8s.io namespace on the node: the namespace the
kubelet (CRI) uses, so a pod whose image is there starts without a pull. The images the node's own image
carries (control plane, pause, kubelet, add-ons) are there from boot and listed as bundled.`,
	}
	c.AddCommand(newImageImport(g), newImageList(g), newImageRemove(g))
	return c
}

func newImageImport(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Import an image archive into the node's k8s.io namespace (operator)",
		Long: `import streams an image archive to the node, which imports it into containerd's k8s.io namespace (the
one the kubelet uses) and unpacks it, so a pod starts from it without a registry.

FILE is an OCI image layout or a 'docker save' archive, as a tar or a gzip-compressed tar (detected); '-'
reads it from standard input. Images are named as containerd and the kubelet know them: a docker
archive's RepoTags and an OCI layout's org.opencontainers.image.ref.name (a full reference; a tag alone
is refused) or io.containerd.image.name, short names normalised (app:1.0 is docker.io/library/app:1.0),
so a pod must ask for that name (with imagePullPolicy IfNotPresent or Never). Only the node's platform
(linux/amd64) is imported.

The node keeps the upload on its EPHEMERAL volume while it checks it, and needs about twice the
archive's size free there, plus room for the unpacked layers. It checks the archive's SHA-256, then its
structure (every blob present, with the right digest and size; at least one named image; the platform),
and refuses a malformed or truncated archive saying what is wrong. A failed import leaves no image
behind. One import runs at a time on a node. With several --nodes, each node gets the archive in turn.
Progress goes to standard error when the import takes more than a moment; the images imported to
standard output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, display := args[0], filepath.Base(args[0])
			if path == "-" {
				tmp, err := spoolStdin(cmd.InOrStdin())
				if err != nil {
					return err
				}
				defer os.Remove(tmp)
				path, display = tmp, "stdin"
			}
			h, err := archiveHeader(path, display)
			if err != nil {
				return err
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				res, err := importArchive(cmd.Context(), nc, path, h, newImportProgress(g.stderr, prefix, display, time.Now))
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, res)
				}
				for _, i := range res.Images {
					fmt.Fprintf(g.stdout, "%simported %s (%s, %s)\n", prefix, i.Name, shortDigest(i.Digest), humanSize(i.Size))
				}
				return nil
			})
		},
	}
}

// spoolStdin copies standard input to a temporary file, so its size and checksum go in the header and
// every node gets the same bytes.
func spoolStdin(in io.Reader) (string, error) {
	f, err := os.CreateTemp("", "cairnctl-image-*.tar")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("read standard input: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// archiveHeader reads the file once for its size and SHA-256, which the node checks what it received
// against.
func archiveHeader(path, display string) (*machine.ImageImportHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s is empty", display)
	}
	return &machine.ImageImportHeader{FileName: display, Size: uint64(n), Sha256: hex.EncodeToString(h.Sum(nil))}, nil
}

// importChunk is the size of one data message.
const importChunk = 1 << 20

// importArchive sends the header and the file to one node while it reads the node's progress, and
// returns the node's result.
func importArchive(ctx context.Context, nc machine.MachineClient, path string, h *machine.ImageImportHeader, progress *importProgress) (*machine.ImageImportResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := nc.ImageImport(ctx)
	if err != nil {
		return nil, err
	}
	sendErr := make(chan error, 1)
	go func() {
		err := sendArchive(stream, path, h)
		if err != nil {
			cancel() // the node must not take a partial archive for a whole one
		}
		sendErr <- err
	}()
	for {
		r, err := stream.Recv()
		if err != nil {
			// A local read failure explains the cancelled call better than the cancellation does.
			if serr := <-sendErr; serr != nil {
				return nil, serr
			}
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the node ended the import without a result")
			}
			return nil, err
		}
		if p := r.GetProgress(); p != nil {
			progress.show(p)
			continue
		}
		if res := r.GetResult(); res != nil {
			progress.done()
			return res, nil
		}
	}
}

// sendArchive sends the header, then the file in chunks, then closes the sending side. A send that fails
// means the node ended the call; Recv reports why, so that is not an error here.
func sendArchive(stream machine.Machine_ImageImportClient, path string, h *machine.ImageImportHeader) error {
	if err := stream.Send(&machine.ImageImportRequest{Msg: &machine.ImageImportRequest_Header{Header: h}}); err != nil {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		// A new buffer per message: gRPC may still hold the last one.
		buf := make([]byte, importChunk)
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if serr := stream.Send(&machine.ImageImportRequest{Msg: &machine.ImageImportRequest_Data{Data: buf[:n]}}); serr != nil {
				return nil
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return stream.CloseSend()
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// importProgress prints the node's progress to standard error, once the import has taken more than a
// moment (a small image imports without a word), and the upload's percentage at most every few seconds.
type importProgress struct {
	w           io.Writer
	prefix, cli string
	now         func() time.Time
	start, last time.Time
	printed     bool
}

// Thresholds of the progress lines.
const (
	progressQuiet  = time.Second     // nothing is printed before
	progressUpload = 3 * time.Second // between two upload lines
)

func newImportProgress(w io.Writer, prefix, file string, now func() time.Time) *importProgress {
	return &importProgress{w: w, prefix: prefix, cli: file, now: now, start: now()}
}

func (p *importProgress) show(m *machine.ImageImportProgress) {
	now := p.now()
	if now.Sub(p.start) < progressQuiet {
		return
	}
	switch m.Phase {
	case "receiving":
		if p.printed && now.Sub(p.last) < progressUpload && (m.Size == 0 || m.Received < m.Size) {
			return
		}
		if m.Size > 0 {
			fmt.Fprintf(p.w, "%suploading %s: %d%% (%s of %s)\n", p.prefix, p.cli, m.Received*100/m.Size, humanSize(m.Received), humanSize(m.Size))
		} else {
			fmt.Fprintf(p.w, "%suploading %s: %s\n", p.prefix, p.cli, humanSize(m.Received))
		}
	case "unpacking":
		fmt.Fprintf(p.w, "%sunpacking %s\n", p.prefix, m.Image)
	default:
		fmt.Fprintf(p.w, "%s%s %s\n", p.prefix, m.Phase, p.cli)
	}
	p.printed, p.last = true, now
}

func (p *importProgress) done() {
	if p.printed {
		fmt.Fprintf(p.w, "%sdone in %s\n", p.prefix, p.now().Sub(p.start).Round(100*time.Millisecond))
	}
}

func newImageList(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the images in the node's k8s.io namespace",
		Long: `list shows the images in containerd's k8s.io namespace, the kubelet's: name, the digest the name points
to, the size of the node's platform's content, whether the node's own image carries it (bundled: image
remove keeps it unless forced) and whether it is unpacked (a container starts from it at once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.ImageList(cmd.Context(), &machine.ImageListRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sNAME\tDIGEST\tSIZE\tBUNDLED\tUNPACKED\n", prefix)
				for _, i := range r.Images {
					fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", prefix, i.Name, shortDigest(i.Digest), humanSize(i.Size), yes(i.Bundled), yes(i.Unpacked))
				}
				return w.Flush()
			})
		},
	}
}

func newImageRemove(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "remove NAME...",
		Short: "Remove images from the node's k8s.io namespace (operator)",
		Long: `remove deletes images from containerd's k8s.io namespace by name: the full name image list shows, or a
short one (app:1.0 for docker.io/library/app:1.0). It removes all the names given or none: a name the
node lacks is NotFound, and an image the node's own image carries (the control plane's, pause, the
kubelet's, the add-ons') is refused unless --force. The space is free once the command returns. A pod
that still needs a removed image cannot start again without a registry.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.ImageRemove(cmd.Context(), &machine.ImageRemoveRequest{Names: args, Force: force})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				for _, n := range r.Removed {
					fmt.Fprintf(g.stdout, "%sremoved %s\n", prefix, n)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&force, "force", false, "also remove images the node's own image carries (the control plane may not start again)")
	return c
}

// shortDigest is a digest's algorithm and first twelve hex digits, as tables show it.
func shortDigest(d string) string {
	alg, hexPart, ok := strings.Cut(d, ":")
	if !ok || len(hexPart) <= 12 {
		return dash(d)
	}
	return alg + ":" + hexPart[:12]
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}
