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
