package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// serveRegistry serves the test images over the registry protocol, for the node's containerd to use as
// a mirror. Imported images cover every pod that may use an image already present; a few conformance
// tests insist on imagePullPolicy: Always, which asks a registry for the manifest every time. On an
// air-gapped node that pull can only succeed against a registry the node can reach, and a failed pull
// leaves the kubelet treating the image as one it must pull (its pull records), failing every later pod
// of that image: so the suite gets a registry, on this machine, holding only what images.tar holds.
func serveRegistry(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to serve on, HOST:PORT (plain HTTP)")
	archive := fs.String("archive", "_out/conformance/images.tar", "the OCI archive `conformance build` wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("registry: -listen HOST:PORT is required")
	}
	dir, err := os.MkdirTemp("", "cairn-conformance-registry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := untar(*archive, dir); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", *archive, err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("read %s: %w", *archive, err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	for _, desc := range manifest.Manifests {
		full := desc.Annotations["io.containerd.image.name"]
		// A mirror is asked for the repository without the registry's host: serve it under that path.
		_, path, ok := strings.Cut(full, "/")
		if !ok {
			return fmt.Errorf("image %q: want HOST/PATH:TAG", full)
		}
		ref, err := name.ParseReference(*listen+"/"+path, name.Insecure)
		if err != nil {
			return err
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return fmt.Errorf("image %s: %w", full, err)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s: %w", full, err)
		}
	}
	progress("registry: serving %d images at http://%s", len(manifest.Manifests), *listen)
	<-ctx.Done()
	return nil
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", archive, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return fmt.Errorf("%s: entry %q leaves the archive", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.Create(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
