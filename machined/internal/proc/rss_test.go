package proc

import "testing"

func TestParseRSS(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"Name:\tmachined\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nRssAnon:\t  234 kB\nRssFile:\t 1000 kB\nThreads:\t7\n", 1234 << 10},
		{"Name:\tkthreadd\nThreads:\t1\n", 0}, // kernel threads have no VmRSS
		{"VmRSS:\t  12x kB\n", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := parseMemory([]byte(tt.in)); got.RSS != tt.want {
			t.Errorf("parseMemory(%q).RSS = %d, want %d", tt.in, got.RSS, tt.want)
		}
	}
	if m := parseMemory([]byte("VmRSS:\t 1234 kB\nRssAnon:\t  234 kB\nRssFile:\t 1000 kB\n")); m.Anon != 234<<10 || m.File != 1000<<10 {
		t.Errorf("parseMemory split = %+v, want anon 234 kB and file 1000 kB", m)
	}
	if RSS(0) == 0 {
		t.Errorf("RSS(0) = 0, want this test process's resident memory")
	}
	if m := ResidentMemory(0); m.Anon == 0 || m.File == 0 {
		t.Errorf("ResidentMemory(0) = %+v, want this test process's private and file pages", m)
	}
}
