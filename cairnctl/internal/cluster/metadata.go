package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-os/cairn/cairnctl/internal/imds"
)

// Where a local node's user data comes from (AddOptions.UserData).
const (
	UserDataNoCloud = "nocloud" // a seed disk labelled CIDATA
	UserDataEC2     = "ec2"     // an IMDSv2 metadata service at 169.254.169.254
)

// checkUserDataSource refuses a source other than the two a local VM can have.
func checkUserDataSource(source string) error {
	if source != "" && source != UserDataNoCloud && source != UserDataEC2 {
		return fmt.Errorf("--userdata=%s: the local user data sources are %s (a seed disk) and %s (a metadata service)", source, UserDataNoCloud, UserDataEC2)
	}
	return nil
}

// giveUserData hands node s its user data from source: a seed disk added to s.Disks, or the metadata
// directory its metadata service serves (StartVM finds it there). It says where, for the progress line.
func giveUserData(ctx context.Context, source string, s *VMSpec, userData []byte) (string, error) {
	if source == UserDataEC2 {
		dir := metadataDir(s.Dir)
		if err := imds.Write(dir, userData, s.Node.Name); err != nil {
			return "", fmt.Errorf("node %s: %w", s.Node.Name, err)
		}
		return fmt.Sprintf("served by an IMDSv2 metadata service at %s, from %s", imds.Address, dir), nil
	}
	d, err := seedDisk(ctx, s.Dir, userData, s.Node.Name, seedNetworkConfig(s.Node))
	if err != nil {
		return "", err
	}
	s.Disks = append(s.Disks, d)
	// The seed's network-config gives the node its L2 address, as a cloud's does: not ip= as well.
	s.L2ByPlatform = true
	return "on a NoCloud seed with its L2 address in network-config, " + d.File, nil
}

// metadataDir is where a node's metadata service keeps its user data, hostname and token key.
func metadataDir(nodeDir string) string { return filepath.Join(nodeDir, "imds") }

// metadataCommand is what QEMU runs for each connection the node opens to 169.254.169.254:80 when the
// node has a metadata directory (nil when it has none): this cairnctl, serving from that directory. The
// directory stays with the node, so a restarted node finds its metadata service again, as on a cloud.
func metadataCommand(nodeDir string) ([]string, error) {
	dir := metadataDir(nodeDir)
	if !imds.Exists(dir) {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the metadata service is served by cairnctl, whose path is unknown: %w", err)
	}
	return []string{exe, "cluster", "imds", "--dir", dir}, nil
}
