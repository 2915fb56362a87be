package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"

	"github.com/cairn-os/cairn/api/payload"
)

// Why dm-verity rather than a SHA-256 of the whole image: a node used to read and hash all of the
// payload's 78 MiB before it mounted it, about 7 s of CPU under emulation, on the path to Running of
// every boot of a configured node, and the check said nothing of a medium changed after it. With the
// tree appended, the kernel checks each block as it is read and fails the read of a block that does not
// match, for as long as the payload is mounted; nothing is read in advance.

// appendVerity appends image's dm-verity superblock and hash tree (api/payload's layout) with
// veritysetup, and returns what a node needs to open it. The salt and the UUID are derived from the
// squashfs image's own SHA-256, so the same image always gets the same tree (veritysetup picks random
// ones otherwise).
func appendVerity(ctx context.Context, image, squashfsSHA256 string) (payload.Verity, error) {
	fi, err := os.Stat(image)
	if err != nil {
		return payload.Verity{}, err
	}
	size := fi.Size()
	if size%payload.VerityBlock != 0 {
		return payload.Verity{}, fmt.Errorf("%s is %d bytes, not a multiple of %d: mksquashfs pads to 4 KiB unless told not to", image, size, payload.VerityBlock)
	}
	seed := sha256.Sum256([]byte("cairn payload verity " + squashfsSHA256))
	salt, u := hex.EncodeToString(seed[:]), seed[:16]
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	out, err := exec.CommandContext(ctx, "veritysetup", payload.FormatArgs(image, size, salt, uuid)...).CombinedOutput()
	if err != nil {
		return payload.Verity{}, fmt.Errorf("veritysetup format %s: %w: %s", image, err, out)
	}
	f, err := os.Open(image)
	if err != nil {
		return payload.Verity{}, err
	}
	defer f.Close()
	v, err := payload.ReadVerity(f)
	if err != nil {
		return payload.Verity{}, fmt.Errorf("%s after veritysetup format: %w", image, err)
	}
	// What the node will compute from the tree must be what veritysetup says it made.
	if m := rootHashLine.FindSubmatch(out); m == nil || string(m[1]) != v.RootHash || v.DataSize != size {
		return payload.Verity{}, fmt.Errorf("veritysetup format %s: its root hash (output %q) is not the tree's %s over %d bytes", image, out, v.RootHash, v.DataSize)
	}
	return v, nil
}

var rootHashLine = regexp.MustCompile(`Root hash:\s+([0-9a-f]{64})`)
