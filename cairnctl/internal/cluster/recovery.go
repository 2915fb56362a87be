package cluster

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/api/config"
)

// RecoveryKeyFile is where cluster create and cluster add keep a node's STATE recovery key, in the node's
// directory (readable by its owner alone).
const RecoveryKeyFile = "state-recovery-key"

// NewRecoveryKey makes a recovery key: 160 random bits as 32 base-32 characters in groups of four, easy
// to read out and type, and strong enough for the cheap key derivation of its LUKS2 slot.
func NewRecoveryKey() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	s := base32.StdEncoding.EncodeToString(b)
	var groups []string
	for i := 0; i < len(s); i += 4 {
		groups = append(groups, s[i:i+4])
	}
	return strings.Join(groups, "-"), nil
}

// StateRecoveryKey is a new recovery key when the machine config asks for an encrypted STATE, and ""
// when it does not (or does not parse: the node reports that, field by field).
func StateRecoveryKey(cfgYAML []byte) (string, error) {
	c, err := config.Parse(cfgYAML)
	if err != nil || c.Machine.Disks.State.Encryption == "" {
		return "", nil
	}
	return NewRecoveryKey()
}

// RecoveryNotice is what cairnctl prints once with a recovery key it sent.
func RecoveryNotice(node, key string) string {
	return fmt.Sprintf("STATE of %s is encrypted; its recovery key, shown this once (keep it offline: with it, "+
		"`cryptsetup open` reads the disk on any machine should the TPM ever refuse):\n\n    %s\n", node, key)
}

// saveRecoveryKey keeps a local cluster node's recovery key in its directory.
func saveRecoveryKey(dir, node, key string, p *Progress) error {
	if key == "" {
		return nil
	}
	path := filepath.Join(NodeDir(dir, node), RecoveryKeyFile)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("save the STATE recovery key of %s: %w", node, err)
	}
	p.Printf("%s: STATE is encrypted; its recovery key is in %s", node, path)
	return nil
}
