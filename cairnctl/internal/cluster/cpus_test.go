package cluster

import "testing"

func TestDefaultCPUs(t *testing.T) {
	for _, tc := range []struct{ host, cps, workers, wantCP, wantW int }{
		{host: 2, cps: 1, workers: 0, wantCP: 2, wantW: 2},
		{host: 2, cps: 1, workers: 1, wantCP: 2, wantW: 1},
		{host: 2, cps: 1, workers: 2, wantCP: 2, wantW: 1},
		{host: 2, cps: 3, workers: 0, wantCP: 1, wantW: 1},
		{host: 1, cps: 1, workers: 0, wantCP: 2, wantW: 2},
		{host: 4, cps: 1, workers: 1, wantCP: 2, wantW: 2},
		{host: 16, cps: 3, workers: 2, wantCP: 2, wantW: 2},
		{host: 4, cps: 3, workers: 1, wantCP: 1, wantW: 1},
	} {
		cp, w := DefaultCPUs(tc.host, tc.cps, tc.workers)
		if cp != tc.wantCP || w != tc.wantW {
			t.Errorf("DefaultCPUs(%d, %d, %d) = %d, %d, want %d, %d", tc.host, tc.cps, tc.workers, cp, w, tc.wantCP, tc.wantW)
		}
	}
}

// Workers yield the host's cores to the control planes; control planes run at the default niceness.
func TestNice(t *testing.T) {
	if got := Nice(RoleWorker); got != WorkerNice || got <= 0 {
		t.Errorf("Nice(worker) = %d, want WorkerNice (%d), above 0", got, WorkerNice)
	}
	if got := Nice(RoleControlPlane); got != 0 {
		t.Errorf("Nice(control plane) = %d, want 0", got)
	}
}
