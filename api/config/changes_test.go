package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEffectOf(t *testing.T) {
	tests := map[string]Effect{
		"machine.kubelet.extraArgs.v":                   Live,
		"machine.network.interfaces[0].addresses[1]":    Live,
		"machine.disks.etcd.serial":                     Immutable,
		"machine.hostname":                              Reboot,
		"cluster.id":                                    Immutable,
		"cluster.apiServer.extraArgs.audit-log-maxage":  Live,
		"cluster.secrets.etcdCA.key":                    Immutable,
		"machine.someFieldNobodyClassified":             Immutable,
		"machine.timezone":                              Immutable, // a prefix of a word is not a prefix of a path
		"machine.time.servers[0]":                       Live,
		"cluster.network.podCIDR":                       Immutable,
		"machine.registries.docker.io.mirrors[0]":       Live,
		"cluster.controllerManager.extraArgs.v":         Live,
		"machine.network":                               Live,
		"cluster.joinTokens":                            Immutable,
		"cluster.join.endpoints[0]":                     Live,
		"machine.certSANs[2]":                           Reboot,
		"apiVersion":                                    Immutable,
		"cluster.coreDNS.replicas":                      Live,
		"cluster.kubernetesVersion":                     Immutable,
		"cluster.machineCA":                             Immutable,
		"cluster.proxy.mode":                            Live,
		"cluster.etcd.quotaBackendBytes":                Live,
		"machine.disks.ephemeral":                       Immutable,
		"cluster.scheduler.disabled":                    Live,
		"machine.kubelet":                               Live,
		"cluster.endpoint":                              Immutable,
		"cluster.name":                                  Immutable,
		"kind":                                          Immutable,
		"machine.type":                                  Immutable,
		"machine.registries.ghcr.io.insecureSkipVerify": Live,
	}
	for path, want := range tests {
		if got, why := EffectOf(path); got != want || why == "" {
			t.Errorf("EffectOf(%s) = %s (%q), want %s", path, got, why, want)
		}
	}
}

func TestChangesAndRedact(t *testing.T) {
	old := generated(t).ControlPlane
	old.Cluster.Join = &Join{Endpoints: []string{"10.5.0.2:50001"}, Token: "abc.def"}
	old.Machine.Registries = map[string]Registry{"docker.io": {Username: "u", Password: "p"}}
	new, err := clone(old)
	if err != nil {
		t.Fatal(err)
	}
	new.Machine.Kubelet.ExtraArgs = map[string]string{"v": "4"}
	new.Machine.Hostname = "renamed"
	new.Machine.Disks.State.Serial = "other"
	got, err := Changes(old, new)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "machine.disks.state.serial", Effect: Immutable},
		{Path: "machine.hostname", Effect: Reboot},
		{Path: "machine.kubelet.extraArgs.v", Effect: Live},
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Why" }, cmp.Ignore())); diff != "" {
		t.Errorf("Changes() (-want +got):\n%s", diff)
	}

	r, err := Redact(old)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := Marshal(r)
	for _, secret := range []string{old.Cluster.Secrets.MachineCA.Key, old.Cluster.Secrets.ServiceAccountKey, old.Cluster.Secrets.BootstrapToken, "abc.def", "password: p"} {
		if strings.Contains(string(data), strings.TrimSpace(secret)) {
			t.Errorf("the redacted config still holds %.40q", secret)
		}
	}
	certLine := strings.Split(old.Cluster.Secrets.MachineCA.Cert, "\n")[1]
	if !strings.Contains(string(data), certLine) || old.Cluster.Secrets.BootstrapToken == Redacted {
		t.Errorf("Redact() dropped a certificate or changed its input")
	}
}

// Every field of the config type has a rule in the effects table: a field added without one fails here
// (it would otherwise be refused as immutable on a running node, by accident rather than by decision).
func TestEveryFieldHasARule(t *testing.T) {
	var paths []string
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		switch typ.Kind() {
		case reflect.Map:
			walk(path+".key", typ.Elem())
			return
		case reflect.Struct:
		default:
			paths = append(paths, path)
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") {
				walk(path, f.Type)
				continue
			}
			walk(join(path, name), f.Type)
		}
	}
	walk("", reflect.TypeOf(MachineConfig{}))
	if len(paths) < 50 {
		t.Fatalf("found only %d paths: the walk is broken", len(paths))
	}
	for _, p := range paths {
		if _, why := EffectOf(p); strings.HasPrefix(why, "no rule") {
			t.Errorf("config path %s has no rule in the effects table (changes.go): decide whether it is live, reboot or immutable", p)
		}
	}
}
