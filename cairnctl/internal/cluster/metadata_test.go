package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/cairnctl/internal/imds"
)

// A node gets a metadata service only when add wrote its metadata directory, and keeps it across
// restarts because the directory is in the node's.
func TestMetadataCommand(t *testing.T) {
	nd := t.TempDir()
	if cmd, err := metadataCommand(nd); err != nil || cmd != nil {
		t.Errorf("metadataCommand(node without metadata) = %q, %v; want nil", cmd, err)
	}
	if err := imds.Write(metadataDir(nd), []byte("kind: JoinConfig\n"), "worker-1"); err != nil {
		t.Fatal(err)
	}
	cmd, err := metadataCommand(nd)
	if err != nil || len(cmd) != 5 || cmd[1] != "cluster" || cmd[2] != "imds" || cmd[4] != filepath.Join(nd, "imds") {
		t.Errorf("metadataCommand(node with metadata) = %q, %v; want this cairnctl's `cluster imds --dir %s/imds`", cmd, err, nd)
	}
}

// --userdata=ec2 puts the user data behind the node's metadata service and attaches no seed; a source
// a local VM cannot have is refused by name.
func TestGiveUserData(t *testing.T) {
	spec := VMSpec{Node: Node{Name: "w3"}, Dir: t.TempDir()}
	where, err := giveUserData(context.Background(), UserDataEC2, &spec, []byte("kind: JoinConfig\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Disks) != 0 || !imds.Exists(metadataDir(spec.Dir)) || !strings.Contains(where, "169.254.169.254") {
		t.Errorf("giveUserData(ec2) = %q, disks %v; want a metadata directory and no seed disk", where, spec.Disks)
	}
	ud, err := os.ReadFile(filepath.Join(metadataDir(spec.Dir), imds.UserDataFile))
	if err != nil || string(ud) != "kind: JoinConfig\n" {
		t.Errorf("served user data = %q, %v", ud, err)
	}
	if err := checkUserDataSource("gce"); err == nil || !strings.Contains(err.Error(), "--userdata=gce") {
		t.Errorf("checkUserDataSource(gce) = %v, want an error naming --userdata=gce", err)
	}
	for _, ok := range []string{"", UserDataNoCloud, UserDataEC2} {
		if err := checkUserDataSource(ok); err != nil {
			t.Errorf("checkUserDataSource(%q) = %v", ok, err)
		}
	}
}
