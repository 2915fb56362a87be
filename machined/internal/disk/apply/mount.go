package apply

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

// Mounter mounts a filesystem, as mount(2). machined/internal/sys implements it; this package only needs
// the one call.
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
}

// DefaultMountInfo is the mount table of the calling thread: a thread may have its own mount namespace (the
// integration tests do), and /proc/self would show the main thread's.
const DefaultMountInfo = "/proc/thread-self/mountinfo"

// mountFlags per volume. EPHEMERAL (/var) holds container root filesystems, which need device nodes and
// set-uid binaries; STATE and ETCD hold only data.
func mountFlags(v plan.Volume) uintptr {
	if v == plan.Ephemeral {
		return 0
	}
	return unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
}

// MountEntry is one line of a mountinfo file.
type MountEntry struct {
	Dev     string // MAJOR:MINOR
	Target  string
	FSType  string
	Source  string
	Options string // per-mount options, e.g. rw,nosuid,relatime
}

// mountsAt lists what is mounted at target, bottom first; the last entry is the one visible there.
func mountsAt(mountinfo, target string) ([]MountEntry, error) {
	all, err := ReadMountInfo(mountinfo)
	if err != nil {
		return nil, err
	}
	var out []MountEntry
	for _, e := range all {
		if e.Target == target {
			out = append(out, e)
		}
	}
	return out, nil
}

// ReadMountInfo reads a mountinfo file, in mount order.
func ReadMountInfo(mountinfo string) ([]MountEntry, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []MountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if e, ok := parseMountInfo(sc.Text()); ok {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table %s: %w", mountinfo, err)
	}
	return out, nil
}

// parseMountInfo reads "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue":
// the fields before the "-" are ID, parent, MAJOR:MINOR, root, mount point, options, optional fields.
func parseMountInfo(line string) (MountEntry, bool) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+3 {
		return MountEntry{}, false
	}
	return MountEntry{Dev: f[2], Target: unescapeOctal(f[4]), FSType: f[sep+1], Source: unescapeOctal(f[sep+2]), Options: f[5]}, true
}

// unescapeOctal undoes the kernel's \040-style escaping of spaces, tabs, newlines and backslashes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
