package workload

import (
	"context"
	"time"

	"github.com/cairn-os/cairn/machined/internal/certs"
)

// Certificates lists the node's Kubernetes certificates (the Certificates RPC): the PKI directory's and
// the kubeconfigs' client certificates, with when each expires and is renewed.
func (w *Workload) Certificates(context.Context) ([]certs.Cert, error) {
	r := w.Renderer()
	if r == nil {
		return nil, nil // before the workload started: no certificates yet
	}
	return certs.Read(r.Layout().Kubernetes())
}

// renewCertificates re-issues a control plane's leaf certificates and kubeconfigs when one of them has
// less than a third of its life left, is missing, cannot be read or lacks a name or address the node now has (StalePKI), on every boot before the static
// pods start, so they start with the new ones. The CAs come from the config and are never changed here.
// It renews them all at once: they were issued together, and one renewal keeps them in step.
func (w *Workload) renewCertificates(ctx context.Context) error {
	list, err := w.Certificates(ctx)
	now := w.Now()
	due := certs.Due(list, now)
	missing := w.Renderer().StalePKI()
	if err == nil && len(due) == 0 && len(list) > 0 && len(missing) == 0 {
		next := time.Time{}
		for _, c := range list {
			if !c.CA && (next.IsZero() || c.RenewAt().Before(next)) {
				next = c.RenewAt()
			}
		}
		w.Log.Info("certificates valid", "count", len(list), "nextRenewal", next.Format(time.DateOnly))
		return nil
	}
	var names []string
	for _, c := range due {
		names = append(names, c.Name+" (expires "+c.NotAfter.Format(time.DateOnly)+")")
	}
	w.Log.Info("renewing the control plane's certificates", "due", names, "stale", missing, "unreadable", err)
	return w.writePKI(ctx)
}
