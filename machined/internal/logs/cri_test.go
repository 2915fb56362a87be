package logs

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCRI(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	tests := []struct {
		line    string
		want    criLine
		wantErr bool
	}{
		{line: "2026-01-02T03:04:05.123456789Z stdout F hello world", want: criLine{Time: ts, Stream: "stdout", Msg: "hello world"}},
		{line: "2026-01-02T03:04:05.123456789Z stderr P part one ", want: criLine{Time: ts, Stream: "stderr", Partial: true, Msg: "part one "}},
		{line: "2026-01-02T03:04:05.123456789Z stdout F ", want: criLine{Time: ts, Stream: "stdout"}},
		{line: "2026-01-02T03:04:05.123456789Z stdout F", want: criLine{Time: ts, Stream: "stdout"}},
		{line: "2026-01-02T03:04:05.123456789Z stdout F:x extra tags", want: criLine{Time: ts, Stream: "stdout", Msg: "extra tags"}},
		{line: "2026-01-02T04:04:05.123456789+01:00 stdout F  two  spaces ", want: criLine{Time: ts, Stream: "stdout", Msg: " two  spaces "}},
		{line: "yesterday stdout F x", wantErr: true},
		{line: "2026-01-02T03:04:05Z stdin F x", wantErr: true},
		{line: "2026-01-02T03:04:05Z stdout X x", wantErr: true},
		{line: "just text", wantErr: true},
		{line: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseCRI(tc.line)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseCRI(%q) error = %v, want error %v", tc.line, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if !got.Time.Equal(tc.want.Time) {
			t.Errorf("parseCRI(%q).Time = %v, want %v", tc.line, got.Time, tc.want.Time)
		}
		got.Time, tc.want.Time = time.Time{}, time.Time{}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseCRI(%q) mismatch (-want +got):\n%s", tc.line, diff)
		}
	}
}

func TestAssemblerJoinsPartsPerStream(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	in := []criLine{
		{Time: at(1), Stream: "stdout", Partial: true, Msg: "a long "},
		{Time: at(2), Stream: "stderr", Msg: "an error"},
		{Time: at(3), Stream: "stdout", Partial: true, Msg: "line that "},
		{Time: at(4), Stream: "stdout", Msg: "ends here"},
		{Time: at(5), Stream: "stdout", Msg: "short"},
	}
	type out struct {
		Sec int64
		Msg string
	}
	var a assembler
	var got []out
	for _, l := range in {
		if t, msg, ok := a.add(l); ok {
			got = append(got, out{t.Unix(), msg})
		}
	}
	want := []out{{2, "an error"}, {1, "a long line that ends here"}, {5, "short"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assembled lines mismatch (-want +got):\n%s", diff)
	}
}

func TestAssemblerBoundsAnEndlessLine(t *testing.T) {
	var a assembler
	part := criLine{Stream: "stdout", Partial: true, Msg: string(make([]byte, 16<<10))}
	var sent int
	for i := 0; i < 10; i++ {
		if _, msg, ok := a.add(part); ok {
			sent++
			if len(msg) > maxAssembled {
				t.Fatalf("assembled line of %d bytes, want at most %d", len(msg), maxAssembled)
			}
		}
	}
	if sent == 0 {
		t.Fatalf("160 KiB of partial parts never made a line; want one every %d bytes", maxAssembled)
	}
}
