package cmd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newCerts(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "certs",
		Short: "Inspect the node's Kubernetes certificates",
	}
	c.AddCommand(newCertsCheck(g))
	return c
}

func newCertsCheck(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "List every Kubernetes certificate of the node with its expiry and renewal date",
		Long: `check lists the certificates under the node's /etc/kubernetes: the PKI directory's and the client
certificates inside its kubeconfigs, with when each expires and when the node renews it.

A control plane renews its leaf certificates and kubeconfigs once less than a third of their life (one
year) is left: when it boots, and while it runs at a check every 12 hours, after which it restarts etcd,
the API server, the controller manager and the scheduler one at a time onto the new ones. The CAs come
from the cluster's config and are never renewed by a node. A worker's kubelet renews its own client
certificate.

check fails (exit status 1) when a certificate has expired, is past its renewal date (a renewal failed:
'cairnctl logs machined' says why) or could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			var trouble []string
			err := g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.Certificates(cmd.Context(), &machine.CertificatesRequest{})
				if err != nil {
					return err
				}
				for _, p := range r.Problems {
					trouble = append(trouble, fmt.Sprintf("%s%s", prefix, p))
				}
				for _, c := range r.Certificates {
					if v := certVerdict(c, now); v != "ok" && v != "CA" {
						trouble = append(trouble, fmt.Sprintf("%s%s: %s", prefix, c.Name, v))
					}
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sNAME\tSUBJECT\tEXPIRES\tRENEWS\tSTATUS\n", prefix)
				for _, c := range r.Certificates {
					renews := "never (CA)"
					if c.RenewAt != nil {
						renews = c.RenewAt.AsTime().Format(time.DateOnly)
					}
					fmt.Fprintf(w, "%s%s\t%s\t%s (%s)\t%s\t%s\n", prefix, c.Name, c.Subject, c.NotAfter.AsTime().Format(time.DateOnly),
						within(c.NotAfter.AsTime().Sub(now)), renews, certVerdict(c, now))
				}
				for _, p := range r.Problems {
					fmt.Fprintf(w, "%s%s\t\t\t\tunreadable\n", prefix, p)
				}
				return w.Flush()
			})
			if err != nil {
				return err
			}
			if len(trouble) > 0 {
				return errors.New("certificates need attention:\n  " + strings.Join(trouble, "\n  "))
			}
			return nil
		},
	}
}

// certVerdict is a certificate's STATUS: ok, CA, "renewal due" (past its renewal date: the node has not
// renewed it yet) or "expired".
func certVerdict(c *machine.Certificate, now time.Time) string {
	switch {
	case !now.Before(c.NotAfter.AsTime()):
		return "expired"
	case c.Ca:
		return "CA"
	case c.RenewAt != nil && !now.Before(c.RenewAt.AsTime()):
		return "renewal due"
	}
	return "ok"
}

// within prints a remaining time in days: "in 364d", or "3d ago" once past.
func within(d time.Duration) string {
	days := int(d.Hours() / 24)
	if d < 0 {
		return fmt.Sprintf("%dd ago", -days)
	}
	return fmt.Sprintf("in %dd", days)
}
