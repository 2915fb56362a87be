package kube

import (
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

func TestRegistryFilesGolden(t *testing.T) {
	c := testConfig(t)
	ca := testSecrets(t).KubernetesCA.Cert // any PEM certificate
	c.Machine.Registries = map[string]config.Registry{
		// Mirrors in the order given, the second one configured itself (CA, credentials).
		"docker.io":                 {Mirrors: []string{"https://mirror-b.example:5000", "https://mirror-a.example", "http://10.5.0.1:5000"}},
		"mirror-a.example":          {CA: ca, Username: "puller", Password: "s3cret"},
		"registry.example.com:5000": {InsecureSkipVerify: true},
	}
	r, err := New(c, testNode, paths.Paths{Root: "/"}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	files, err := r.RegistryFiles()
	if err != nil {
		t.Fatalf("RegistryFiles: %v", err)
	}
	var all strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f.Path, "hosts.toml") && f.Mode != modeSecret {
			t.Errorf("%s has mode %v: it may carry credentials, want %v", f.Path, f.Mode, modeSecret)
		}
		all.WriteString("### " + f.Path + "\n")
		if strings.HasSuffix(f.Path, "ca.crt") {
			// The test CA is made afresh every run: compare it here, not in the golden file.
			if string(f.Data) != ca {
				t.Errorf("%s holds %q, want the configured CA", f.Path, f.Data)
			}
			continue
		}
		all.Write(f.Data)
	}
	golden(t, "containerd/registries.golden", []byte(all.String()))

	// What containerd's parser sees: the mirrors in order, then the registry itself.
	docker := files.Get("/etc/containerd/certs.d/docker.io/hosts.toml")
	if docker == nil {
		t.Fatalf("no hosts.toml for docker.io among %d files", len(files))
	}
	var doc struct {
		Host map[string]struct {
			Capabilities []string            `toml:"capabilities"`
			CA           string              `toml:"ca"`
			Header       map[string][]string `toml:"header"`
		} `toml:"host"`
	}
	if err := toml.Unmarshal(docker.Data, &doc); err != nil {
		t.Fatalf("hosts.toml is not valid TOML: %v\n%s", err, docker.Data)
	}
	a := doc.Host["https://mirror-a.example"]
	if a.CA != "/etc/containerd/certs.d/mirror-a.example/ca.crt" || len(a.Header["Authorization"]) != 1 {
		t.Errorf("mirror-a entry = %+v, want its own CA file and credentials", a)
	}
	order := []string{"mirror-b.example:5000", "mirror-a.example", "10.5.0.1:5000"}
	last := -1
	for _, m := range order {
		i := strings.Index(string(docker.Data), m+`"]`)
		if i < last {
			t.Errorf("mirror %s is out of the config's order in:\n%s", m, docker.Data)
		}
		last = i
	}
}

func TestContainerdUsesRegistryHostsDir(t *testing.T) {
	f, err := newRendererAt(t, "/tmp/sbx").ContainerdConfig(ContainerdOptions{CNIBinDir: "/usr/lib/cairn/payload/cni"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(f.Data), "config_path = '/tmp/sbx/etc/containerd/certs.d'") {
		t.Errorf("containerd config does not point CRI at the registry hosts directory:\n%s", f.Data)
	}
}
