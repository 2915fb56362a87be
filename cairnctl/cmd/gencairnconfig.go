package cmd

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

func newGenCairnconfig(g *globals) *cobra.Command {
	var secretsFile, name, out, role string
	var endpoints []string
	var force bool
	c := &cobra.Command{
		Use:   "cairnconfig --secrets secrets.yaml --cluster-name NAME --endpoints NODE[,NODE] [--role admin|operator|reader]",
		Short: "Issue a client certificate from the cluster's machine CA and write a cairnconfig for it",
		Long: `gen cairnconfig signs a new client certificate with the machine CA of secrets.yaml and writes a
cairnconfig with it: to renew an admin certificate before it expires (a year after it was made), or to hand
someone a narrower role. The role is the certificate's Organization, which every node checks on every call:
  admin     everything
  operator  no reset, no secrets (kubeconfig, etcd snapshot, join tokens)
  reader    read-only
Nothing is sent to the nodes: they trust any certificate their machine CA signed, until it expires. The
file holds a private key and is written readable by you alone; it refuses to overwrite a file unless
--force is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if secretsFile == "" || name == "" || len(endpoints) == 0 {
				return errors.New("--secrets, --cluster-name and --endpoints are required")
			}
			data, err := os.ReadFile(secretsFile)
			if err != nil {
				return err
			}
			secrets, err := config.ParseSecrets(data)
			if err != nil {
				return fmt.Errorf("%s: %w", secretsFile, err)
			}
			if err := config.ValidateSecrets(secrets); err != nil {
				return fmt.Errorf("%s: %w", secretsFile, err)
			}
			full := role
			if !strings.Contains(full, ":") {
				full = "cairn:" + role // admin -> cairn:admin, as the certificate carries it
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s exists; pass --force to overwrite it", out)
			}
			ctx, err := client.NewContext(pki.PEM{Cert: []byte(secrets.MachineCA.Cert), Key: []byte(secrets.MachineCA.Key)}, full, endpoints, time.Now())
			if err != nil {
				return err
			}
			cc := &client.Config{}
			cc.Merge(name, ctx)
			if err := cc.Save(out); err != nil {
				return err
			}
			leaf, err := pki.ParseCert([]byte(ctx.Cert))
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s: context %s, role %s, certificate valid until %s\n", out, name, full, leaf.NotAfter.Format(time.DateOnly))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&secretsFile, "secrets", "", "the cluster's secrets.yaml (its machine CA signs the certificate)")
	f.StringVar(&name, "cluster-name", "", "the context's name in the cairnconfig (the cluster's name)")
	f.StringSliceVar(&endpoints, "endpoints", nil, "the nodes' machine API addresses, HOST[:PORT][,...]")
	f.StringVar(&role, "role", "admin", "the certificate's role: admin, operator or reader")
	f.StringVar(&out, "out", "cairnconfig", "the file to write")
	f.BoolVar(&force, "force", false, "overwrite the file")
	return c
}
