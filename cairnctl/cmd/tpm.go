package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newTPM(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "tpm", Short: "The node's TPM and its measured lock"}
	var pcrs []uint
	p := &cobra.Command{
		Use:   "pcrs [--pcr N,...]",
		Short: "Read the TPM's PCRs (SHA-256 bank) and this boot's measurement log of the node lock",
		Long: `pcrs reads PCRs 0 to 23 (or those given) of the node's TPM, and the events machined extended into its
PCR this boot (the node lock: cluster ID and role), which replay to that PCR's value. Any role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &machine.TPMPCRsRequest{}
			for _, n := range pcrs {
				req.Pcrs = append(req.Pcrs, uint32(n))
			}
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.TPMPCRs(cmd.Context(), req)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				w := table(g.stdout)
				fmt.Fprintf(w, "%sPCR\tSHA256\n", prefix)
				for _, v := range r.Pcrs {
					mark := ""
					if v.Index == r.MeasuredPcr && len(r.Log) > 0 {
						mark = "  (the measured lock)"
					}
					fmt.Fprintf(w, "%s%d\t%x%s\n", prefix, v.Index, v.Sha256, mark)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				for _, e := range r.Log {
					fmt.Fprintf(g.stdout, "%smeasured into PCR %d at %s: %s, cluster %s, role %s, digest %s\n", prefix, r.MeasuredPcr,
						e.Time.AsTime().Local().Format(time.DateTime), e.Kind, e.ClusterId, e.Role, e.Digest)
				}
				return nil
			})
		},
	}
	p.Flags().UintSliceVar(&pcrs, "pcr", nil, "the PCRs to read (default 0 to 23)")
	c.AddCommand(p)
	return c
}
