package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-os/cairn/api/payload"
)

// The programs Init starts first from the payload's image layers: the kube binary (the kubelet, then
// every control-plane component) and, on a control plane, etcd.
var (
	prefetchWorker       = []string{"kube"}
	prefetchControlPlane = []string{"kube", "etcd"}
)

// prefetchPayload reads those programs once, in the background, as soon as the payload is mounted.
// Their pages come out of the payload image compressed (and checked by dm-verity) on first touch; read
// here, that work runs while containerd starts and the images are registered, when the guest's vCPUs
// have room (make bench's CPU row: 1.2-1.6 of 2 cores then, against about 1.9 once the API server
// starts), instead of on the kubelet's and etcd's start. Measured under emulation (one-node creates):
// the kubelet's first line came 3.9 and 4.4 s after machined started it, against 6.1-10.7 s (mostly 8-9)
// in 21 creates without; containerd's start took about a second longer beside the read. The pages
// stay in the page cache (they are read, not mapped: no process's memory grows), where the kernel can
// take them back.
func (w *Workload) prefetchPayload() {
	names := prefetchWorker
	if w.controlPlane() {
		names = prefetchControlPlane
	}
	go func() {
		start := time.Now()
		n, files, err := prefetch(w.Payload.Dir, names)
		if err != nil {
			w.Log.Warn("payload prefetch", "error", err)
			return
		}
		w.Log.Info("payload prefetched", "files", files, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	}()
}

// prefetch reads every file named name under the payload's layers' usr/local/bin to its end and returns
// how many bytes and files it read.
func prefetch(dir string, names []string) (int64, int, error) {
	var total int64
	var files int
	for _, name := range names {
		matches, err := filepath.Glob(filepath.Join(dir, payload.LayersDir, "*", "usr", "local", "bin", name))
		if err != nil {
			return total, files, err
		}
		if len(matches) == 0 {
			return total, files, fmt.Errorf("no layer of the payload in %s holds usr/local/bin/%s", dir, name)
		}
		for _, m := range matches {
			n, err := readAll(m)
			total += n
			if err != nil {
				return total, files, err
			}
			files++
		}
	}
	return total, files, nil
}

func readAll(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, f)
	return n, errors.Join(err, f.Close())
}
