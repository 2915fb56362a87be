// Command helloimage writes the hello example's image archive: go run ./hack/examples/helloimage/cmd -o FILE
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-os/cairn/hack/examples/helloimage"
)

func main() {
	out := flag.String("o", "_out/examples/hello.tar", "archive to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "helloimage:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	bin, err := helloimage.Build(".")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	if err := helloimage.Write(f, bin, helloimage.Ref); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s)\n", out, helloimage.Ref)
	return nil
}
