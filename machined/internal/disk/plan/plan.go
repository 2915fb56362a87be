// Package plan decides, without touching anything, what Cairn will do to which disk for each of its
// volumes: format a blank disk, keep and mount a disk that already carries this cluster's label for the
// volume, wipe and format only when the config says `wipe: true` for that disk, or refuse. The same plan
// backs the Plan RPC (a dry run), Init/Join (which refuse to start if any step refuses) and package apply
// (which re-reads each disk and aborts if it changed since the plan).
//
// See label.go for the on-disk Cairn label.
package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// Action is what a step does.
type Action string

// Actions.
const (
	Format        Action = "format"          // blank disk (or Cairn's own partition left empty by an interrupted format)
	Keep          Action = "keep"            // this cluster's volume: fsck, mount, data kept
	WipeAndFormat Action = "wipe-and-format" // something else on it, and wipe: true for this disk
	Refuse        Action = "refuse"
	Tmpfs         Action = "tmpfs"
)

// Step is the plan for one volume.
type Step struct {
	Volume Volume `json:"volume"`
	Field  string `json:"field"` // machine.disks.etcd
	Action Action `json:"action"`
	Target string `json:"target"` // mount point
	// ClusterID is the cluster whose label this step writes or keeps.
	ClusterID string `json:"clusterID,omitempty"`
	// Filesystem is the one to create (format) or the one found (keep).
	Filesystem string `json:"filesystem,omitempty"`
	// Disk is the chosen disk exactly as the plan saw it; apply re-reads it and aborts on any difference.
	Disk *inventory.Disk `json:"disk,omitempty"`
	// PartitionName and FSLabel are the Cairn label this step writes or found.
	PartitionName string `json:"partitionName,omitempty"`
	FSLabel       string `json:"fsLabel,omitempty"`
	// Encrypt: the volume is (keep) or becomes (format) LUKS2, its key sealed to the TPM (disk/crypt).
	Encrypt bool `json:"encrypt,omitempty"`
	// Reason says in one line why this action, for `cairnctl plan`.
	Reason string `json:"reason"`
	// Error is set for Refuse: what was found and how to allow it.
	Error string `json:"error,omitempty"`
	err   error
}

// Err is the refusal of this step, nil unless Action is Refuse. A step decoded from JSON keeps its refusal.
func (s Step) Err() error {
	switch {
	case s.err != nil:
		return s.err
	case s.Action == Refuse && s.Error != "":
		return errors.New(s.Error)
	case s.Action == Refuse:
		return fmt.Errorf("%s: refused", s.Field)
	}
	return nil
}

// Device is the chosen disk's path, or "" for tmpfs and for refusals that chose no disk.
func (s Step) Device() string {
	if s.Disk == nil {
		return ""
	}
	return s.Disk.Path
}

// Plan is every volume's step, in mount order.
type Plan struct {
	ClusterID string `json:"clusterID"`
	Steps     []Step `json:"steps"`
}

// Err joins every refusal; nil when the plan may be applied.
func (p Plan) Err() error {
	var errs []error
	for _, s := range p.Steps {
		if err := s.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Input is everything the planner looks at.
type Input struct {
	Disks       []inventory.Disk
	Config      config.Disks
	MachineType string // config.TypeControlPlane or config.TypeWorker
	ClusterID   string
	// TPM says the machine has a TPM 2.0, which an encrypted volume's key is sealed to.
	TPM bool
}

// Make plans every volume. It never fails as a whole: problems become Refuse steps, so an operator sees
// the fate of every volume at once.
func Make(in Input) Plan {
	p := Plan{ClusterID: in.ClusterID}
	specs := []struct {
		v    Volume
		spec *config.DiskSpec
	}{{State, &in.Config.State}, {Ephemeral, &in.Config.Ephemeral}}
	switch in.MachineType {
	case config.TypeControlPlane:
		specs = append(specs, struct {
			v    Volume
			spec *config.DiskSpec
		}{Etcd, in.Config.Etcd})
	case config.TypeWorker:
		if in.Config.Etcd != nil {
			p.Steps = append(p.Steps, refuse(Etcd, nil, fmt.Errorf("%s is set, but workers run no etcd: remove it", Etcd.Field())))
		}
	default:
		for _, v := range []Volume{State, Ephemeral} {
			p.Steps = append(p.Steps, refuse(v, nil, fmt.Errorf("machine.type %q: want %q or %q", in.MachineType,
				config.TypeControlPlane, config.TypeWorker)))
		}
		return p
	}
	for _, s := range specs {
		p.Steps = append(p.Steps, planVolume(s.v, s.spec, in))
	}
	refuseShared(p.Steps)
	// Keep the steps in mount order even when a worker's ETCD refusal came first.
	ordered := make([]Step, 0, len(p.Steps))
	for _, v := range []Volume{State, Ephemeral, Etcd} {
		for _, s := range p.Steps {
			if s.Volume == v {
				ordered = append(ordered, s)
			}
		}
	}
	p.Steps = ordered
	return p
}

func planVolume(v Volume, spec *config.DiskSpec, in Input) Step {
	if spec == nil {
		return refuse(v, nil, fmt.Errorf("%s is missing: a control-plane node needs a disk for etcd (a selector, or `tmpfs` to keep etcd in RAM)", v.Field()))
	}
	if spec.Tmpfs {
		return Step{Volume: v, Field: v.Field(), Action: Tmpfs, Target: v.DefaultTarget(),
			Reason: "RAM-backed tmpfs, as the config says: its contents are lost at every reboot"}
	}
	if spec.Selector == (config.Selector{}) {
		return refuse(v, nil, fmt.Errorf("%s selects no disk: set path, serial, model, wwn, label or a size range, or write `tmpfs` for a RAM-backed volume", v.Field()))
	}
	fs := spec.FilesystemOrDefault()
	if fs != config.FilesystemXFS && fs != config.FilesystemExt4 {
		return refuse(v, nil, fmt.Errorf("%s.filesystem %q: want %q or %q", v.Field(), fs, config.FilesystemXFS, config.FilesystemExt4))
	}
	if in.ClusterID == "" {
		return refuse(v, nil, fmt.Errorf("cluster.id is empty: Cairn labels every disk it formats with the cluster ID"))
	}
	d, err := inventory.Match(in.Disks, spec.Selector)
	if err != nil {
		return refuse(v, nil, fmt.Errorf("%s: %w", v.Field(), err))
	}
	s := decide(v, d, fs, spec.Wipe, in.ClusterID)
	return encryption(s, spec.Encryption, fs, in.TPM)
}

// encryption marks the steps that make or open an encrypted volume. Whether a kept volume is encrypted is
// the disk's to say, not the config's: STATE made before the config asked for encryption stays as it is.
func encryption(s Step, want, fs string, hasTPM bool) Step {
	switch s.Action {
	case Keep:
		if s.Filesystem != probe.TypeLUKS {
			if want != "" {
				s.Reason += fmt.Sprintf("; %s.encryption applies when the volume is formatted, so this one stays unencrypted", s.Field)
			}
			return s
		}
		// Filesystem is the one made inside should the volume still be empty (a format cut short).
		s.Encrypt, s.Filesystem = true, fs
		s.Reason = fmt.Sprintf("this cluster's %s volume, encrypted (LUKS2 labelled %s): open with the key sealed to this machine's TPM, check and mount, data kept", s.Volume, s.Volume.FSLabel())
	case Format, WipeAndFormat:
		if want == "" {
			return s
		}
		if !hasTPM {
			return refuseDisk(s, fmt.Errorf("%s.encryption is %q, but this machine has no TPM 2.0 to seal the key to (%s)", s.Field, want, s.Disk.Describe()))
		}
		s.Encrypt = true
		s.Reason += ", inside a LUKS2 volume whose key is sealed to this machine's TPM"
	}
	return s
}

// decide is the heart of the safety promise: a disk is formatted only when blank or when the config says
// wipe: true for it, and kept only when it carries this cluster's label for this very volume.
func decide(v Volume, d inventory.Disk, fs string, wipe bool, clusterID string) Step {
	s := Step{Volume: v, Field: v.Field(), Target: v.DefaultTarget(), Disk: &d, Filesystem: fs, ClusterID: clusterID,
		PartitionName: PartitionName(v, clusterID), FSLabel: v.FSLabel()}
	if d.ProbeError != "" {
		return refuseDisk(s, fmt.Errorf("%s: could not read %s (%s); Cairn formats only disks it has read",
			v.Field(), d.Describe(), d.ProbeError))
	}
	if len(d.Signatures) == 0 && len(d.Partitions) == 0 {
		s.Action = Format
		s.Reason = fmt.Sprintf("blank disk: create partition %q and an %s filesystem labelled %s", s.PartitionName, fs, s.FSLabel)
		return s
	}
	found := DescribeContents(d)
	wipeOr := func(what string) Step {
		if wipe {
			s.Action = WipeAndFormat
			s.Reason = fmt.Sprintf("%s.wipe is true: erase %s and format", v.Field(), found)
			return s
		}
		return refuseDisk(s, fmt.Errorf("%s: %s %s; Cairn formats only blank disks: set %s.wipe: true to erase it",
			v.Field(), d.Describe(), what, v.Field()))
	}
	own, ok := cairnPartition(d)
	switch {
	case !ok:
		return wipeOr("holds " + found)
	case own.label.Problem != "":
		return wipeOr("holds a damaged Cairn label (" + own.label.Problem + ")")
	case !own.label.IsCluster(clusterID):
		return wipeOr(fmt.Sprintf("holds the %s volume of another Cairn cluster (cluster ID %q)", own.label.Volume, own.label.Cluster))
	case own.label.Volume != v:
		return wipeOr(fmt.Sprintf("holds this cluster's %s volume, not %s", own.label.Volume, v))
	}
	if fstype, ok := holdsCairnFS(own.partition, v); ok {
		s.Action = Keep
		s.Filesystem = fstype
		s.Reason = fmt.Sprintf("this cluster's %s volume (%s labelled %s): check and mount, data kept", v, fstype, v.FSLabel())
		if fstype != fs {
			s.Reason += fmt.Sprintf("; the config asks for %s, but the existing %s is kept", fs, fstype)
		}
		return s
	}
	if len(own.partition.Signatures) == 0 {
		s.Action = Format
		s.Reason = fmt.Sprintf("Cairn's partition %q has no filesystem yet (an interrupted format): create an %s filesystem labelled %s",
			s.PartitionName, fs, s.FSLabel)
		return s
	}
	return wipeOr(fmt.Sprintf("carries this cluster's %s label, but the partition holds %s instead of Cairn's filesystem",
		v, probe.Describe(own.partition.Signatures)))
}

// refuseShared refuses every volume whose disk another volume also chose.
func refuseShared(steps []Step) {
	users := map[string][]int{}
	for i, s := range steps {
		if s.Disk != nil {
			users[s.Disk.Name] = append(users[s.Disk.Name], i)
		}
	}
	for _, idx := range users {
		if len(idx) < 2 {
			continue
		}
		var fields []string
		for _, i := range idx {
			fields = append(fields, steps[i].Field)
		}
		for _, i := range idx {
			steps[i] = refuseDisk(steps[i], fmt.Errorf("%s select the same disk %s: each volume needs a disk of its own",
				strings.Join(fields, " and "), steps[i].Disk.Describe()))
		}
	}
}

func refuse(v Volume, d *inventory.Disk, err error) Step {
	return refuseDisk(Step{Volume: v, Field: v.Field(), Target: v.DefaultTarget(), Disk: d}, err)
}

func refuseDisk(s Step, err error) Step {
	s.Action, s.err, s.Error, s.Reason = Refuse, err, err.Error(), err.Error()
	return s
}

// DescribeContents says what is on a disk and its partitions, e.g.
// `a GPT partition table, ...; partition 1 holds an ext4 filesystem labelled "data", UUID ...`.
func DescribeContents(d inventory.Disk) string {
	parts := []string{probe.Describe(d.Signatures)}
	if len(d.Signatures) == 0 && len(d.Partitions) > 0 {
		parts[0] = fmt.Sprintf("a partition table Cairn does not read (the kernel lists %d partitions)", len(d.Partitions))
	}
	for _, p := range d.Partitions {
		if len(p.Signatures) > 0 {
			parts = append(parts, fmt.Sprintf("partition %d holds %s", p.Number, probe.Describe(p.Signatures)))
		}
	}
	return strings.Join(parts, "; ")
}
