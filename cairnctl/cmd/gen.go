package cmd

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

func newGen(g *globals) *cobra.Command {
	gen := &cobra.Command{Use: "gen", Short: "Generate configs and secrets"}
	gen.AddCommand(newGenConfig(g), newGenCairnconfig(g), newGenUpgradeKey(g), newGenUserData(g))
	return gen
}

func newGenConfig(g *globals) *cobra.Command {
	var name, endpoint, out, secretsFile string
	var stateDisk, ephemeralDisk, etcdDisk string
	var force bool
	c := &cobra.Command{
		Use:   "config --cluster-name NAME --endpoint https://HOST:6443",
		Short: "Write secrets.yaml, controlplane.yaml, worker.yaml and cairnconfig for a new cluster",
		Long: `gen config makes a new cluster's secrets (every CA and key, the kubelet bootstrap token) and the
machine configs for its control-plane and worker nodes, plus a cairnconfig holding an admin client
certificate. It refuses to overwrite existing files unless --force is given.

Disks are chosen by selectors; the defaults select the disks that 'cairnctl cluster create' attaches
(serials cairn-state, cairn-ephemeral, cairn-etcd). On other machines pass --state-disk etc. with one of
  tmpfs | path=/dev/sdb | serial=S | model=M | wwn=W | label=L
(several fields separated by commas must all match, e.g. model=QEMU,minSize=10GiB).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || endpoint == "" {
				return errors.New("--cluster-name and --endpoint are required")
			}
			opts := config.GenOptions{ClusterName: name, Endpoint: endpoint, Now: time.Now()}
			for _, d := range []struct {
				flag, val string
				dst       **config.DiskSpec
			}{{"--state-disk", stateDisk, &opts.State}, {"--ephemeral-disk", ephemeralDisk, &opts.Ephemeral}, {"--etcd-disk", etcdDisk, &opts.Etcd}} {
				if d.val == "" {
					continue
				}
				spec, err := parseDiskFlag(d.val)
				if err != nil {
					return fmt.Errorf("%s: %w", d.flag, err)
				}
				*d.dst = spec
			}
			var secrets *config.Secrets
			if secretsFile != "" {
				data, err := os.ReadFile(secretsFile)
				if err != nil {
					return err
				}
				if secrets, err = config.ParseSecrets(data); err != nil {
					return fmt.Errorf("%s: %w", secretsFile, err)
				}
				if err := config.ValidateSecrets(secrets); err != nil {
					return fmt.Errorf("%s: %w", secretsFile, err)
				}
			}
			gen, err := config.Generate(opts, secrets)
			if err != nil {
				return err
			}
			u, _ := url.Parse(endpoint)
			ctx, err := client.NewContext(pki.PEM{Cert: []byte(gen.Secrets.MachineCA.Cert), Key: []byte(gen.Secrets.MachineCA.Key)},
				client.RoleAdmin, []string{u.Hostname()}, opts.Now)
			if err != nil {
				return err
			}
			cc := &client.Config{}
			cc.Merge(name, ctx)
			files := map[string]any{"secrets.yaml": gen.Secrets, "controlplane.yaml": gen.ControlPlane, "worker.yaml": gen.Worker}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return err
			}
			order := []string{"secrets.yaml", "controlplane.yaml", "worker.yaml", "cairnconfig"}
			if !force {
				for _, f := range order {
					if _, err := os.Stat(filepath.Join(out, f)); err == nil {
						return fmt.Errorf("%s exists; pass --force to overwrite it (and lose the secrets it holds)", filepath.Join(out, f))
					}
				}
			}
			for _, f := range order[:3] {
				data, err := config.Marshal(files[f])
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(out, f), data, 0o600); err != nil {
					return err
				}
			}
			if err := cc.Save(filepath.Join(out, "cairnconfig")); err != nil {
				return err
			}
			for _, f := range order {
				fmt.Fprintf(g.stdout, "wrote %s\n", filepath.Join(out, f))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&name, "cluster-name", "", "the cluster's name (a DNS label)")
	f.StringVar(&endpoint, "endpoint", "", "the Kubernetes API endpoint, https://HOST:PORT")
	f.StringVar(&out, "out", ".", "directory to write the files into")
	f.StringVar(&secretsFile, "with-secrets", "", "reuse the secrets of an existing secrets.yaml instead of making new ones")
	f.StringVar(&stateDisk, "state-disk", "", "selector of the STATE disk (default serial=cairn-state)")
	f.StringVar(&ephemeralDisk, "ephemeral-disk", "", "selector of the EPHEMERAL disk (default serial=cairn-ephemeral)")
	f.StringVar(&etcdDisk, "etcd-disk", "", "selector of the etcd disk on control-plane nodes (default serial=cairn-etcd)")
	f.BoolVar(&force, "force", false, "overwrite existing files")
	return c
}

// parseDiskFlag reads `tmpfs` or comma-separated selector fields.
func parseDiskFlag(v string) (*config.DiskSpec, error) {
	if v == config.TmpfsVolume {
		return &config.DiskSpec{Tmpfs: true}, nil
	}
	d := &config.DiskSpec{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || val == "" {
			return nil, fmt.Errorf("%q: want tmpfs or field=value pairs such as serial=S,minSize=10GiB", v)
		}
		if ok, err := d.Selector.Set(k, val); ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		switch k {
		case "filesystem":
			d.Filesystem = val
		case "wipe":
			d.Wipe = val == "true"
		default:
			return nil, fmt.Errorf("unknown selector field %q (%s, filesystem, wipe)", k, config.SelectorKeys)
		}
	}
	return d, nil
}
