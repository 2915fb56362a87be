package cmd

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
)

func TestCertVerdict(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &machine.Certificate{NotBefore: timestamppb.New(from), NotAfter: timestamppb.New(from.AddDate(1, 0, 0)),
		RenewAt: timestamppb.New(from.AddDate(0, 8, 0))}
	ca := &machine.Certificate{Ca: true, NotBefore: timestamppb.New(from), NotAfter: timestamppb.New(from.AddDate(10, 0, 0))}
	for _, tc := range []struct {
		c    *machine.Certificate
		now  time.Time
		want string
	}{
		{leaf, from.AddDate(0, 1, 0), "ok"},
		{leaf, from.AddDate(0, 9, 0), "renewal due"},
		{leaf, from.AddDate(1, 0, 1), "expired"},
		{ca, from.AddDate(5, 0, 0), "CA"},
		{ca, from.AddDate(10, 0, 1), "expired"},
	} {
		if got := certVerdict(tc.c, tc.now); got != tc.want {
			t.Errorf("certVerdict(ca=%t, %s) = %q, want %q", tc.c.Ca, tc.now.Format(time.DateOnly), got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{364 * 24 * time.Hour: "in 364d", -72 * time.Hour: "3d ago"} {
		if got := within(d); got != want {
			t.Errorf("within(%s) = %q, want %q", d, got, want)
		}
	}
}
