package config

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestVersionsMatchBundle(t *testing.T) {
	f, err := os.Open("../../image/bundle/versions.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	for key, want := range map[string]string{
		"KUBERNETES_VERSION": KubernetesVersion, "ETCD_VERSION": EtcdVersion, "PAUSE_TAG": PauseTag,
		"COREDNS_VERSION": CoreDNSVersion, "FLANNEL_VERSION": FlannelVersion,
	} {
		if env[key] != want {
			t.Errorf("versions.env %s = %q, but api/config says %q: change both", key, env[key], want)
		}
	}
}
