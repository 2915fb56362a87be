package server

import (
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The API server is the top of machined's packages: it validates, calls the packages below it and maps
// their errors to gRPC codes. A package below that imports it for a type points the dependency upwards
// and pulls gRPC into code that has no API (kmsg, logs, etcdops, workload did). Only machined's main,
// which wires the server, and tests may import it.
func TestNoPackageBelowImportsTheServer(t *testing.T) {
	const self = "github.com/cairn-os/cairn/machined/internal/server"
	internal, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(internal, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if filepath.Dir(path) == filepath.Join(internal, "server") {
			return nil
		}
		f, err := parser.ParseFile(gotoken.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == self {
				rel, _ := filepath.Rel(internal, path)
				t.Errorf("%s imports the API server package; move the type it needs to the package that owns it", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
