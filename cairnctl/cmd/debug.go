package cmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newDebug(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "debug",
		Short: "Look inside machined itself (admin only)",
	}
	c.AddCommand(newPprof(g), newWatchdogStop(g))
	return c
}

func newWatchdogStop(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "watchdog-stop",
		Short: "Stop machined petting the node's watchdog: the machine resets when it runs out (admin only)",
		Long: `watchdog-stop makes machined on each selected node stop petting the machine's watchdog, as a hung
node would: the watchdog resets the machine when its timeout runs out, and the node boots back to where
its lock says (Running, for a configured node). It shows that the watchdog is armed and works. A machine
without a hardware watchdog (QEMU's microvm, many cloud VMs) has the kernel's software watchdog
(softdog) armed instead; a node with neither answers FailedPrecondition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.WatchdogStop(cmd.Context(), &machine.WatchdogStopRequest{})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%snode %s stopped petting its watchdog: it resets within %d s\n", prefix, nc.name, r.ResetWithinSeconds)
				return nil
			})
		},
	}
}

func newPprof(g *globals) *cobra.Command {
	var (
		force   bool
		gc      bool
		seconds uint32
		debug   uint32
	)
	c := &cobra.Command{
		Use:   "pprof NAME FILE",
		Short: "Save one of machined's runtime profiles (heap, allocs, goroutine, cpu, ...) to FILE (admin only)",
		Long: `pprof saves a runtime profile of machined on the node (the first one given) to FILE, in the format
'go tool pprof' reads: a node has no shell, so this is how to see what holds machined's memory or time.

NAME is heap (live memory, after a garbage collection unless --gc=false), allocs (every allocation
since start), goroutine, threadcreate, block, mutex or cpu (sampled for --seconds). --debug 1 or 2 writes
pprof's text form instead; heap's ends with the Go runtime's memory statistics. NAME metrics is the
runtime's own accounting as text (runtime/metrics): where the memory goes besides the heap, then the
kernel's account of the process, of each mapping of machined's binary and of any other mapping
holding huge pages or 64 kB or more (heap arenas, runtime metadata, the bss), with its address range.

  cairnctl debug pprof heap heap.pprof && go tool pprof -top -sample_index=inuse_space heap.pprof`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, path := args[0], args[1]
			node, size, sum, err := g.fetchToFile(path, force, func(nc nodeClient) (func() (*machine.DataChunk, error), error) {
				s, err := nc.Profile(cmd.Context(), &machine.ProfileRequest{Name: name, Seconds: seconds, Debug: debug, Gc: gc})
				if err != nil {
					return nil, err
				}
				return s.Recv, nil
			})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return json.NewEncoder(g.stdout).Encode(map[string]any{"file": path, "node": node, "profile": name, "size": size, "sha256": sum})
			}
			fmt.Fprintf(g.stdout, "wrote %s profile of machined on node %s to %s (%s)\n", name, node, path, humanSize(uint64(size)))
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&force, "force", false, "overwrite FILE")
	f.BoolVar(&gc, "gc", true, "heap: collect garbage first, so the profile counts live objects only")
	f.Uint32Var(&seconds, "seconds", 0, "cpu: how long to sample (default 10, at most 300)")
	f.Uint32Var(&debug, "debug", 0, "0: pprof's protobuf; 1 or 2: text")
	return c
}
