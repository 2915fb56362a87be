package proc

import "testing"

func TestParseRSS(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"Name:\tmachined\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t7\n", 1234 << 10},
		{"Name:\tkthreadd\nThreads:\t1\n", 0}, // kernel threads have no VmRSS
		{"VmRSS:\t  12x kB\n", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := parseRSS([]byte(tt.in)); got != tt.want {
			t.Errorf("parseRSS(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if RSS(0) == 0 {
		t.Errorf("RSS(0) = 0, want this test process's resident memory")
	}
}
