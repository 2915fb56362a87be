package kube

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/cairn-os/cairn/api/config"
)

// hostsFile is the part of containerd's hosts.toml (docs/hosts.md) Cairn writes. Without a `server` key
// containerd keeps its default upstream for the directory's host (https://HOST, registry-1 for
// docker.io), and the top-level ca, skip_verify and header apply to that upstream.
type hostsFile struct {
	hostEntry
	Hosts map[string]hostEntry // [host."URL"] tables, one per mirror
}

// hostEntry is one host's settings, with containerd's key names.
type hostEntry struct {
	// Capabilities: a mirror serves pulls and tag resolution, never pushes.
	Capabilities []string // capabilities
	CA           string   // ca: a file path
	SkipVerify   bool     // skip_verify
	Header       map[string][]string
}

// RegistryFiles are containerd's registry host files from machine.registries: for every configured
// host, DIR/HOST/hosts.toml naming its mirrors in order (each with its own CA, skip_verify and
// credentials when the host it points at is configured too), and DIR/HOST/ca.crt. containerd reads the
// directory at every pull, so a rewrite takes effect without a restart. The files carry credentials:
// they are root's only.
func (r *Renderer) RegistryFiles() (Files, error) {
	regs := r.cfg.Machine.Registries
	dir := r.layout.RegistryHostsDir()
	var out Files
	for _, host := range r.cfg.Machine.RegistryHosts() {
		reg := regs[host]
		f := hostsFile{hostEntry: r.hostEntry(host, reg)}
		if len(reg.Mirrors) > 0 {
			f.Hosts = map[string]hostEntry{}
		}
		for i, m := range reg.Mirrors {
			if _, dup := f.Hosts[m]; dup {
				return nil, fmt.Errorf("render registries: machine.registries[%q].mirrors[%d] %s is listed twice", host, i, m)
			}
			e := hostEntry{Capabilities: []string{"pull", "resolve"}}
			if mh := config.MirrorHost(m); mh != "" {
				if mreg, ok := regs[mh]; ok {
					e = r.hostEntry(mh, mreg)
					e.Capabilities = []string{"pull", "resolve"}
				}
			}
			f.Hosts[m] = e
		}
		data, err := marshalHosts(f.hostEntry, reg.Mirrors, f.Hosts)
		if err != nil {
			return nil, fmt.Errorf("render registries: hosts.toml for %s: %w", host, err)
		}
		data = append([]byte("# Written by machined from machine.registries; changes are lost at the next boot.\n"), data...)
		out = append(out, File{Path: filepath.Join(dir, host, "hosts.toml"), Data: data, Mode: modeSecret})
		if reg.CA != "" {
			out = append(out, File{Path: filepath.Join(dir, host, "ca.crt"), Data: []byte(reg.CA), Mode: modePublic})
		}
	}
	return out.sorted(), nil
}

// hostEntry is the TLS and credential settings of one configured host.
func (r *Renderer) hostEntry(host string, reg config.Registry) hostEntry {
	e := hostEntry{SkipVerify: reg.InsecureSkipVerify}
	if reg.CA != "" {
		e.CA = filepath.Join(r.layout.RegistryHostsDir(), host, "ca.crt")
	}
	if reg.Username != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password))
		e.Header = map[string][]string{"Authorization": {"Basic " + auth}}
	}
	return e
}

// marshalHosts writes hosts.toml by hand: containerd tries the [host."…"] tables in the order they
// appear in the file, which a Go map given to a TOML encoder would sort. Every string goes out as a
// JSON string, which is also a valid TOML basic string.
func marshalHosts(top hostEntry, mirrors []string, entries map[string]hostEntry) ([]byte, error) {
	var b bytes.Buffer
	if err := writeEntry(&b, "", top); err != nil {
		return nil, err
	}
	for _, m := range mirrors {
		q, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		if err := writeEntry(&b, "host."+string(q), entries[m]); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

func writeEntry(b *bytes.Buffer, table string, e hostEntry) error {
	if table != "" {
		fmt.Fprintf(b, "\n[%s]\n", table)
	}
	if len(e.Capabilities) > 0 {
		caps, err := json.Marshal(e.Capabilities)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "capabilities = %s\n", caps)
	}
	if e.CA != "" {
		ca, err := json.Marshal(e.CA)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "ca = %s\n", ca)
	}
	if e.SkipVerify {
		b.WriteString("skip_verify = true\n")
	}
	if len(e.Header) > 0 {
		header := "header"
		if table != "" {
			header = table + ".header"
		}
		fmt.Fprintf(b, "\n[%s]\n", header)
		keys := make([]string, 0, len(e.Header))
		for k := range e.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := json.Marshal(e.Header[k])
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "%s = %s\n", k, v)
		}
	}
	return nil
}
