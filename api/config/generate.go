package config

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

// GenOptions are the inputs of `cairnctl gen config`.
type GenOptions struct {
	ClusterName string
	Endpoint    string
	// Disks for the generated configs; nil fields get DefaultDisks.
	State, Ephemeral, Etcd *DiskSpec
	Now                    time.Time
}

// Generated is what `cairnctl gen config` writes.
type Generated struct {
	Secrets      *Secrets
	ControlPlane *MachineConfig
	Worker       *MachineConfig
}

// DefaultDisk selects a disk by the serial Cairn's QEMU launcher gives it (cairn-state, cairn-ephemeral,
// cairn-etcd); on real hardware, edit the selector.
func DefaultDisk(volume string) DiskSpec {
	return DiskSpec{Selector: Selector{Serial: "cairn-" + volume}}
}

// GenerateSecrets makes every CA and key of a new cluster.
func GenerateSecrets(now time.Time) (*Secrets, error) {
	s := &Secrets{APIVersion: APIVersion, Kind: KindSecrets}
	for _, ca := range []struct {
		cn  string
		dst *CertKey
	}{
		{"cairn-machine-ca", &s.MachineCA},
		{"kubernetes", &s.KubernetesCA},
		{"etcd-ca", &s.EtcdCA},
		{"front-proxy-ca", &s.FrontProxyCA},
	} {
		p, err := pki.NewCA(ca.cn, now)
		if err != nil {
			return nil, err
		}
		*ca.dst = CertKey{Cert: string(p.Cert), Key: string(p.Key)}
	}
	sa, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	saPEM, err := pki.EncodeKey(sa)
	if err != nil {
		return nil, err
	}
	s.ServiceAccountKey = string(saPEM)
	s.BootstrapToken = RandomToken()
	return s, nil
}

// Generate makes the configs of a new cluster from fresh or given secrets.
func Generate(o GenOptions, secrets *Secrets) (*Generated, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if secrets == nil {
		var err error
		if secrets, err = GenerateSecrets(o.Now); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("endpoint %q must be a URL like https://HOST:6443", o.Endpoint)
	}
	disk := func(d *DiskSpec, volume string) DiskSpec {
		if d != nil {
			return *d
		}
		return DefaultDisk(volume)
	}
	etcd := disk(o.Etcd, "etcd")
	cluster := Cluster{
		Name:              o.ClusterName,
		ID:                randomHex(8),
		Endpoint:          o.Endpoint,
		KubernetesVersion: KubernetesVersion,
		Network: ClusterNetwork{
			PodCIDR: DefaultPodCIDR, ServiceCIDR: DefaultServiceCIDR,
			DNSDomain: DefaultDNSDomain, NodeCIDRMaskSize: DefaultNodeCIDRMaskSize,
		},
		MachineCA: secrets.MachineCA.Cert,
	}
	cp := &MachineConfig{
		APIVersion: APIVersion, Kind: KindMachineConfig,
		Machine: Machine{Type: TypeControlPlane, Disks: Disks{
			State: disk(o.State, "state"), Ephemeral: disk(o.Ephemeral, "ephemeral"), Etcd: &etcd,
		}},
		Cluster: cluster,
	}
	cp.Cluster.Secrets = secrets
	w := &MachineConfig{
		APIVersion: APIVersion, Kind: KindMachineConfig,
		Machine: Machine{Type: TypeWorker, Disks: Disks{
			State: disk(o.State, "state"), Ephemeral: disk(o.Ephemeral, "ephemeral"),
		}},
		Cluster: cluster,
	}
	w.Cluster.Join = &Join{Endpoints: []string{net.JoinHostPort(u.Hostname(), strconv.Itoa(JoinPort))}}
	for _, c := range []*MachineConfig{cp, w} {
		if err := Validate(c); err != nil {
			return nil, fmt.Errorf("generated config is invalid (a bug, or a bad flag): %w", err)
		}
	}
	return &Generated{Secrets: secrets, ControlPlane: cp, Worker: w}, nil
}

// RandomToken makes a token in kubeadm's ID.SECRET format.
func RandomToken() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:6]) + "." + string(b[6:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
