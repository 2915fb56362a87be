package kmsg

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		rec     string
		want    Record
		line    string
		wantErr bool
	}{
		{
			rec:  "6,339,5140900,-;NET: Registered PF_INET6 protocol family\n",
			want: Record{Facility: 0, Level: 6, Seq: 339, Since: 5140900 * time.Microsecond, Message: "NET: Registered PF_INET6 protocol family"},
			line: "kern.info: NET: Registered PF_INET6 protocol family",
		},
		{
			rec:  "3,1000,9000000,-,caller=T1;virtio_blk virtio2: failed\n SUBSYSTEM=virtio\n DEVICE=+virtio:virtio2\n",
			want: Record{Level: 3, Seq: 1000, Since: 9 * time.Second, Message: "virtio_blk virtio2: failed"},
			line: "kern.err: virtio_blk virtio2: failed",
		},
		{
			rec:  "30,7,100,c;machined: hello\n", // facility daemon, from userspace
			want: Record{Facility: 3, Level: 6, Seq: 7, Since: 100 * time.Microsecond, Message: "machined: hello"},
			line: "daemon.info: machined: hello",
		},
		{
			rec:  `4,8,1,-;tab\x09kept escaped, backslash \x5c and \xc3\xa9 unescaped`,
			want: Record{Level: 4, Seq: 8, Since: time.Microsecond, Message: `tab\x09kept escaped, backslash \ and é unescaped`},
			line: `kern.warning: tab\x09kept escaped, backslash \ and é unescaped`,
		},
		{
			rec:  `6,9,1,-;invalid \xff byte and a cut escape \x4`,
			want: Record{Level: 6, Seq: 9, Since: time.Microsecond, Message: "invalid \uFFFD byte and a cut escape \\x4"},
			line: "kern.info: invalid \uFFFD byte and a cut escape \\x4",
		},
		{
			rec:  "134,10,1,-;local0\n",
			want: Record{Facility: 16, Level: 6, Seq: 10, Since: time.Microsecond, Message: "local0"},
			line: "local0.info: local0",
		},
		{rec: "6,339,5140900;no flags field", wantErr: true},
		{rec: "6,339,5140900,- no semicolon", wantErr: true},
		{rec: "x,339,5140900,-;bad priority", wantErr: true},
		{rec: "6,-1,5140900,-;bad sequence", wantErr: true},
		{rec: "6,1,later,-;bad time", wantErr: true},
	}
	for _, tc := range tests {
		got, err := Parse(tc.rec)
		if (err != nil) != tc.wantErr {
			t.Errorf("Parse(%q) error = %v, want error %v", tc.rec, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tc.rec, diff)
		}
		if l := got.Line(); l != tc.line {
			t.Errorf("Parse(%q).Line() = %q, want %q", tc.rec, l, tc.line)
		}
	}
}

func TestParseUptime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "6167.55 2610.64\n", want: 6167550 * time.Millisecond},
		{in: "0.01 0.00", want: 10 * time.Millisecond},
		{in: "", wantErr: true},
		{in: "soon 1", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseUptime(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && (got-tc.want).Abs() > time.Microsecond) {
			t.Errorf("parseUptime(%q) = %v, %v, want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
