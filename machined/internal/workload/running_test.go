package workload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/certs"
)

type quietLog struct{}

func (quietLog) Info(string, ...any) {}

// TestRenewWhileRunning checks what a Running control plane does at a certificate check: nothing while
// its certificates are good; when one is due, re-issue first, then restart the components one at a time
// in dependency order; and stop at the first component that does not come back.
func TestRenewWhileRunning(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	list := []certs.Cert{
		{Name: "pki/ca.crt", NotBefore: from, NotAfter: from.AddDate(10, 0, 0), CA: true},
		{Name: "pki/apiserver.crt", NotBefore: from, NotAfter: from.AddDate(1, 0, 0)},
	}
	for _, tc := range []struct {
		name      string
		now       time.Time
		listErr   error
		failing   string
		wantSteps []string
		wantErr   string
	}{
		{name: "good for months", now: from.AddDate(0, 6, 0)},
		{name: "due", now: from.AddDate(0, 9, 0),
			wantSteps: []string{"reissue", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}},
		{name: "a certificate that cannot be read", now: from, listErr: errors.New("pki/apiserver.crt: no PEM certificate"),
			wantSteps: []string{"reissue", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}},
		{name: "the API server does not come back", now: from.AddDate(0, 9, 0), failing: "kube-apiserver",
			wantSteps: []string{"reissue", "etcd", "kube-apiserver"}, wantErr: "restart kube-apiserver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			r := renewal{
				now:     func() time.Time { return tc.now },
				list:    func(context.Context) ([]certs.Cert, error) { return list, tc.listErr },
				reissue: func(context.Context) error { steps = append(steps, "reissue"); return nil },
				restart: func(_ context.Context, comp string) error {
					steps = append(steps, comp)
					if comp == tc.failing {
						return errors.New("not ready")
					}
					return nil
				},
				log: quietLog{},
			}
			err := r.renew(context.Background())
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("renew() = %v, want error %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantSteps, steps); diff != "" {
				t.Errorf("renew() steps (-want +got):\n%s", diff)
			}
		})
	}
}
