package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/cairnctl/internal/cluster"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

func newCluster(g *globals) *cobra.Command {
	var stateDir string
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Create, list and destroy local clusters of Cairn nodes in QEMU",
		Long: `cluster runs Cairn nodes as QEMU virtual machines on this host (TCG emulation: no KVM needed).
Each cluster keeps its configs, client config, kubeconfig, disks and console logs under
~/.cairn/clusters/NAME (or --state-dir). Its VMs keep running after cairnctl exits; 'cluster destroy'
stops them and removes everything.`,
	}
	c.PersistentFlags().StringVar(&stateDir, "state-dir", "", "directory holding the local clusters (default ~/.cairn/clusters)")
	root := func() (string, error) {
		if stateDir != "" {
			// Absolute: QEMU's pid and console paths must not depend on where cairnctl ran.
			return filepath.Abs(stateDir)
		}
		return cluster.DefaultRoot()
	}
	c.AddCommand(newClusterCreate(g, root), newClusterAdd(g, root), newClusterDestroy(g, root), newClusterList(g, root),
		newClusterStop(g, root), newClusterStart(g, root), newClusterIMDS())
	return c
}

func newClusterCreate(g *globals, root func() (string, error)) *cobra.Command {
	var o cluster.CreateOptions
	var mode string
	var sizes diskSizes
	var diskFiles []string
	var merge bool
	c := &cobra.Command{
		Use:   "create --name NAME [--controlplanes N] [--workers M]",
		Short: "Boot a local cluster in QEMU: init the first control plane, join the others",
		Long: `create boots one QEMU VM per node from the built image (_out), with blank sparse disks selected by
serial (cairn-state 1 GiB, cairn-ephemeral 8 GiB, cairn-etcd 2 GiB on control planes), a NIC on a
private L2 shared by the cluster's VMs (10.5.0.2, .3, ...; the first control plane is the cluster
endpoint) and the machine API (50000), Kubernetes API (6443) and join service (50001) forwarded to
free ports on 127.0.0.1. It then inits the first control plane, joins the others, and writes the
cairnconfig and kubeconfig. With --no-init it stops once every node answers in maintenance mode.

While it waits it reads every node's console: a guest kernel that panics, reports a CPU stuck for 3
minutes or more, or has run no init 2 minutes after QEMU started (4 in the iso and raw modes) ends the
wait at once with the kernel's line, or with where the silent VM's vCPUs are (QEMU's monitor, on
monitor.sock in the node's directory) and whether its network answers. 'cluster add' does the same.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Root, err = localCluster(o.Name, root, &o.ImageDir); err != nil {
				return err
			}
			o.Mode = qemu.Mode(mode)
			if err := sizes.parse(&o.StateSize, &o.EphemeralSize, &o.EtcdSize); err != nil {
				return err
			}
			if o.DiskFiles, err = parseDiskFiles(diskFiles); err != nil {
				return err
			}
			if merge {
				o.MergeInto = client.DefaultConfigPath()
			}
			o.FormatEvent = formatEvent
			p := cluster.NewProgress(g.stdout)
			res, err := cluster.Create(cmd.Context(), o, p)
			if err != nil {
				return err
			}
			p.Printf("cluster %s created", o.Name)
			res.Instructions(g.stdout, o.NoInit)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Name, "name", "", "the cluster's name (lowercase letters, digits, '-'; required)")
	f.IntVar(&o.ControlPlanes, "controlplanes", 1, "number of control-plane nodes")
	f.IntVar(&o.Workers, "workers", 0, "number of worker nodes")
	f.StringVar(&o.VIP, "vip", "", "a free address of the cluster's L2 (10.5.0.0/24, e.g. 10.5.0.250) that the control planes hold in turn as the API endpoint (cluster.vip): the API survives the loss of any one control plane")
	f.StringVar(&o.ImageDir, "image-dir", "", "directory with vmlinux, initramfs.cpio.zst, payload.squashfs (attached as a read-only disk in vmlinux mode), cairn.iso, cairn.raw (default: the _out of cairnctl's repository, else ./_out)")
	f.StringVar(&mode, "mode", string(qemu.ModeVmlinux), "boot mode: vmlinux (direct kernel boot, fastest), iso (SeaBIOS), iso-uefi (OVMF, the blank disks first in the boot order: a disk written by cairnctl install boots) or raw (UEFI disk)")
	f.IntVar(&o.Memory, "memory", 0, "memory of every node in MiB (default 2048 for control planes, 1024 for workers)")
	f.BoolVar(&o.TPM, "tpm", false, "give every node an emulated TPM 2.0 (swtpm; the iso, iso-uefi and raw modes): its node lock is measured")
	f.BoolVar(&o.EncryptState, "encrypt-state", false, "encrypt every node's STATE (LUKS2, the key sealed to its TPM; needs --tpm); each node's recovery key is kept in its directory under the state dir")
	f.IntVar(&o.CPUs, "cpus", 0, "virtual CPUs per node (default: 2 for control planes while two each fit this host's cores, else 1; 2 for workers only if that still fits, else 1)")
	sizes.register(f, "each node's", "each control plane's")
	f.StringArrayVar(&diskFiles, "disk-file", nil, "SERIAL=FILE: attach an existing disk image to the first control plane, in place of the blank disk of that serial (cairn-state, cairn-ephemeral, cairn-etcd) or as an extra disk (destroy leaves FILE alone)")
	f.BoolVar(&o.NoInit, "no-init", false, "boot the nodes and leave them in maintenance mode (print each node's token and fingerprint)")
	f.StringVar(&o.UserData, "userdata", "", "one control plane that inits itself from user data, its config with bootstrap: true, as a cloud image would: on a NoCloud seed disk (CIDATA; --userdata alone) or from an IMDSv2 metadata service (--userdata=ec2); add nodes with 'cluster add --userdata'")
	f.Lookup("userdata").NoOptDefVal = cluster.UserDataNoCloud
	f.StringArrayVar(&o.KernelArgs, "kernel-arg", nil, "an extra kernel command line argument for every node, e.g. cairn.join=HOST:50001 (repeatable)")
	f.BoolVar(&merge, "merge", false, "also merge the cluster's context into the default cairnconfig ($CAIRNCONFIG or ~/.cairn/config)")
	f.DurationVar(&o.BootTimeout, "boot-timeout", 0, "how long each node may take to answer on its machine API (default 5m)")
	return c
}

func newClusterAdd(g *globals, root func() (string, error)) *cobra.Command {
	var o cluster.AddOptions
	var sizes diskSizes
	c := &cobra.Command{
		Use:   "add --name NAME [--role worker|controlplane] [--self-join | --userdata[=nocloud|ec2]]",
		Short: "Boot one more node for a local cluster and join it",
		Long: `add boots one more QEMU VM for a cluster made by 'cluster create' (the next name of its role and the
next address on the cluster's L2, blank disks) and joins it through the first control plane.

By default the node is joined the way 'cairnctl join' does it: a single-use token from the control
plane, a ticket for the node's key from the join service, and the node's Join RPC over its maintenance
API. With --self-join nobody talks to the node: it boots with
  cairn.join=FIRST:50001 cairn.jointoken=TOKEN cairn.joinca=CAHASH
on its kernel command line and asks for its ticket by itself, as a node of an autoscaling group would.
With --userdata the same three values come as a cloud's user data: a join document (what 'cairnctl
gen userdata' writes) on a NoCloud seed disk labelled CIDATA, with the node's name in its meta-data.
With --userdata=ec2 they come from an EC2-style instance metadata service (IMDSv2, a session token by
PUT, then GETs) at 169.254.169.254, served for this VM alone by cairnctl itself: QEMU runs
'cairnctl cluster imds' for each connection, from the node's directory (imds/requests.log lists what
the node asked). Either way add waits until the node is Running and adds its machine API to the cluster's cairnconfig.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Root, err = localCluster(o.Name, root, &o.ImageDir); err != nil {
				return err
			}
			if err := sizes.parse(&o.StateSize, &o.EphemeralSize, &o.EtcdSize); err != nil {
				return err
			}
			o.FormatEvent = formatEvent
			p := cluster.NewProgress(g.stdout)
			n, err := cluster.Add(cmd.Context(), o, p)
			if err != nil {
				return err
			}
			p.Printf("%s added to cluster %s (%s, machine API on %s)", n.Name, o.Name, n.Role, n.APIEndpoint())
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.Name, "name", "", "the cluster to grow (required)")
	f.StringVar(&o.Role, "role", cluster.RoleWorker, "the new node's role: worker or controlplane")
	f.BoolVar(&o.SelfJoin, "self-join", false, "let the node join by itself from its kernel command line instead of pushing the join to it")
	f.StringVar(&o.UserData, "userdata", "", "let the node join by itself from user data: a join document on a NoCloud seed disk (CIDATA; --userdata alone) or from an IMDSv2 metadata service (--userdata=ec2)")
	f.Lookup("userdata").NoOptDefVal = cluster.UserDataNoCloud
	f.StringVar(&o.ImageDir, "image-dir", "", "directory with the built image (default: the _out of cairnctl's repository, else ./_out)")
	f.IntVar(&o.Memory, "memory", 0, "the node's memory in MiB (default 2048 for a control plane, 1024 for a worker)")
	f.IntVar(&o.CPUs, "cpus", 0, "virtual CPUs (default: as cluster create chooses for the cluster with this node in it)")
	sizes.register(f, "the node's", "a control plane's")
	f.DurationVar(&o.BootTimeout, "boot-timeout", 0, "how long the node may take to answer on its machine API (default 5m)")
	return c
}

// localCluster checks what create and add both need: a --name, the clusters directory (returned) and
// the image directory (defaulted in place).
func localCluster(name string, root func() (string, error), imageDir *string) (string, error) {
	if name == "" {
		return "", errors.New("--name is required")
	}
	r, err := root()
	if err != nil {
		return "", err
	}
	if *imageDir == "" {
		exe, _ := os.Executable()
		*imageDir = cluster.DefaultImageDir(exe)
	}
	return r, nil
}

// diskSizes are the --state-size, --ephemeral-size and --etcd-size flags of create and add.
type diskSizes struct{ state, ephemeral, etcd string }

func (d *diskSizes) register(f *pflag.FlagSet, whose, whoseEtcd string) {
	f.StringVar(&d.state, "state-size", "1GiB", "size of "+whose+" STATE disk")
	f.StringVar(&d.ephemeral, "ephemeral-size", "8GiB", "size of "+whose+" EPHEMERAL disk (/var)")
	f.StringVar(&d.etcd, "etcd-size", "2GiB", "size of "+whoseEtcd+" etcd disk")
}

// parse reads the sizes (1GiB, 512MiB, ...), naming the flag in an error.
func (d *diskSizes) parse(state, ephemeral, etcd *int64) error {
	for _, s := range []struct {
		flag, val string
		dst       *int64
	}{{"--state-size", d.state, state}, {"--ephemeral-size", d.ephemeral, ephemeral}, {"--etcd-size", d.etcd, etcd}} {
		n, err := config.ParseSize(s.val)
		if err != nil {
			return fmt.Errorf("%s: %w", s.flag, err)
		}
		*s.dst = int64(n)
	}
	return nil
}

// parseDiskFiles reads SERIAL=FILE pairs; files become absolute, since QEMU runs elsewhere.
func parseDiskFiles(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range pairs {
		serial, file, ok := strings.Cut(kv, "=")
		if !ok || serial == "" || file == "" {
			return nil, fmt.Errorf("--disk-file %q: want SERIAL=FILE, e.g. cairn-etcd=/tmp/etcd.raw", kv)
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("--disk-file %s: %w", serial, err)
		}
		out[serial] = abs
	}
	return out, nil
}

func newClusterDestroy(g *globals, root func() (string, error)) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "destroy --name NAME",
		Short: "Stop a local cluster's VMs and remove its directory (disks, configs, logs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name is required")
			}
			r, err := root()
			if err != nil {
				return err
			}
			return cluster.Destroy(cmd.Context(), r, name, cluster.NewProgress(g.stdout))
		},
	}
	c.Flags().StringVar(&name, "name", "", "the cluster to destroy (required)")
	return c
}

func newClusterList(g *globals, root func() (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the local clusters, their nodes, and whether each node's VM runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := root()
			if err != nil {
				return err
			}
			infos, err := cluster.Inspect(r)
			if err != nil {
				return err
			}
			if g.output == "json" {
				if infos == nil {
					infos = []cluster.Info{}
				}
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			if len(infos) == 0 {
				fmt.Fprintf(g.stdout, "no clusters in %s\n", r)
				return nil
			}
			w := table(g.stdout)
			fmt.Fprintln(w, "CLUSTER\tNODE\tROLE\tADDRESS\tVM\tMACHINE API\tMODE")
			for _, ci := range infos {
				if ci.Error != "" {
					fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t%s\n", ci.Name, ci.Error)
					continue
				}
				for _, n := range ci.Nodes {
					vm := "stopped"
					if n.Running {
						vm = fmt.Sprintf("running (pid %d)", n.PID)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ci.Name, n.Name, n.Role, n.Address, vm, n.APIEndpoint, ci.Mode)
				}
			}
			return w.Flush()
		},
	}
}
