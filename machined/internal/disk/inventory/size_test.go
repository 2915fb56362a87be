package inventory

import "testing"

func TestHumanSize(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{{0, "0B"}, {512, "512B"}, {20 << 30, "20GiB"}, {523<<20 + 7*4096, "523MiB"}, {1536 << 30, "1.5TiB"}, {100 << 20, "100MiB"}}
	for _, tt := range tests {
		if got := HumanSize(tt.in); got != tt.want {
			t.Errorf("HumanSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
