package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-os/cairn/api/machine"
)

func newLogs(g *globals) *cobra.Command {
	var tail uint32
	var follow, previous bool
	c := &cobra.Command{
		Use:   "logs SERVICE",
		Short: "Show a service's log: machined, containerd, kubelet, or a control-plane container (kube-apiserver, etcd, ...)",
		Long: `logs prints the log of one of the node's services: machined itself and the services it supervises
(containerd, kubelet) from the node's memory, and the control plane's static pods (kube-apiserver,
kube-controller-manager, kube-scheduler, etcd) from the kubelet's container logs. An unknown name is
answered with the names the node knows. With --follow it keeps printing new lines until interrupted.
With --previous it prints a control-plane container's run before its latest restart: why it crashed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.streamEachNode(cmd.Context(), follow, func(ctx context.Context, nc nodeClient, w io.Writer, prefix string) error {
				s, err := nc.Logs(ctx, &machine.LogsRequest{Service: args[0], Tail: tail, Follow: follow, Previous: previous})
				if err != nil {
					return err
				}
				return g.printLines(ctx, s, w, prefix)
			})
		},
	}
	c.Flags().Uint32Var(&tail, "tail", 0, "show only the last N lines (0: all the node keeps)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	c.Flags().BoolVarP(&previous, "previous", "p", false, "a control-plane container's previous run: what it wrote before it exited and was restarted")
	return c
}

func newDmesg(g *globals) *cobra.Command {
	var tail uint32
	var follow bool
	c := &cobra.Command{
		Use:   "dmesg",
		Short: "Show the node's kernel log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.streamEachNode(cmd.Context(), follow, func(ctx context.Context, nc nodeClient, w io.Writer, prefix string) error {
				s, err := nc.Dmesg(ctx, &machine.DmesgRequest{Tail: tail, Follow: follow})
				if err != nil {
					return err
				}
				return g.printLines(ctx, s, w, prefix)
			})
		},
	}
	c.Flags().Uint32Var(&tail, "tail", 0, "show only the last N records (0: all the kernel keeps)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records")
	return c
}

// streamEachNode runs f for every selected node: one after the other, or all at once when following
// (a followed stream never ends, so the next node would never come). Lines go out whole either way.
func (g *globals) streamEachNode(ctx context.Context, follow bool, f func(context.Context, nodeClient, io.Writer, string) error) error {
	if !follow {
		return g.eachNode(func(nc nodeClient, prefix string) error { return f(ctx, nc, g.stdout, prefix) })
	}
	ncs, closeAll, err := g.clients()
	if err != nil {
		return err
	}
	defer closeAll()
	w := &lockedWriter{w: g.stdout}
	errs := make([]string, len(ncs))
	var wg sync.WaitGroup
	for i, nc := range ncs {
		prefix := ""
		if len(ncs) > 1 {
			prefix = nc.name + ": "
		}
		wg.Go(func() {
			if err := f(ctx, nc, w, prefix); err != nil && ctx.Err() == nil {
				errs[i] = fmt.Sprintf("node %s: %s", nc.name, describe(err))
			}
		})
	}
	wg.Wait()
	var failed []string
	for _, e := range errs {
		if e != "" {
			failed = append(failed, e)
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// printLines prints a log stream until it ends: one line per record, or JSON Lines with -o json. ctx is
// the command's: the stream's own context ends with the stream, whatever the reason.
func (g *globals) printLines(ctx context.Context, s interface {
	Recv() (*machine.LogLine, error)
}, w io.Writer, prefix string) error {
	for {
		l, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while following: not an error
			}
			return err
		}
		if g.output == "json" {
			if err := printJSON(w, l); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintln(w, formatLine(l, prefix)); err != nil {
			return err
		}
	}
}

// formatLine is one log line for people: local time to the millisecond, then the line.
func formatLine(l *machine.LogLine, prefix string) string {
	ts := "-"
	if l.Time != nil {
		ts = l.Time.AsTime().Local().Format("2006-01-02 15:04:05.000")
	}
	return prefix + ts + " " + l.Line
}

func newEtcd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "etcd",
		Short: "Inspect the cluster's etcd and back it up (on control-plane nodes)",
	}
	c.AddCommand(newEtcdMembers(g), newEtcdSnapshot(g), newEtcdRemoveMember(g))
	return c
}

func newEtcdMembers(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the etcd cluster's members as the node's member sees them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.eachNode(func(nc nodeClient, prefix string) error {
				r, err := nc.EtcdMembers(cmd.Context(), &machine.EtcdMembersRequest{})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				return printEtcdMembers(g.stdout, prefix, r.Members)
			})
		},
	}
}

func printEtcdMembers(out io.Writer, prefix string, members []*machine.EtcdMember) error {
	w := table(out)
	fmt.Fprintf(w, "%sID\tNAME\tROLE\tPEER URLS\tCLIENT URLS\n", prefix)
	voters := 0
	leader := ""
	for _, m := range members {
		role := "voter"
		switch {
		case m.IsLearner:
			role = "learner"
		case m.IsLeader:
			role, leader = "leader", dash(m.Name)
		}
		if !m.IsLearner {
			voters++
		}
		fmt.Fprintf(w, "%s%x\t%s\t%s\t%s\t%s\n", prefix, m.Id, dash(m.Name), role, dash(strings.Join(m.PeerUrls, ",")),
			dash(strings.Join(m.ClientUrls, ",")))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if leader == "" {
		leader = "none known to this member (no quorum?)"
	}
	_, err := fmt.Fprintf(out, "%s%d voting member(s): a quorum is %d; leader: %s\n", prefix, voters, voters/2+1, leader)
	return err
}

func newEtcdRemoveMember(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-member NAME|ID",
		Short: "Remove the etcd member of a control plane that is gone for good (admin only)",
		Long: `remove-member removes a member from the cluster's etcd through the node given (the first one): use it when
a control plane died and will not come back, so its vote no longer counts against the quorum. Name the
member by its name or hex ID, as 'cairnctl etcd members' shows them. The node refuses its own member
(reset that node instead: a reset leaves etcd before it wipes) and the last voting member; etcd refuses a
removal that would leave the members still up without a quorum. A node whose member was removed must be
reset before it joins again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.firstNode(func(nc nodeClient) error {
				r, err := nc.EtcdRemoveMember(cmd.Context(), &machine.EtcdRemoveMemberRequest{Member: args[0]})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return printJSON(g.stdout, r)
				}
				fmt.Fprintf(g.stdout, "removed etcd member %s (%x)\n", dash(r.Removed.GetName()), r.Removed.GetId())
				if len(r.Members) > 0 {
					return printEtcdMembers(g.stdout, "", r.Members)
				}
				return nil
			})
		},
	}
}

func newEtcdSnapshot(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "snapshot FILE",
		Short: "Save a consistent snapshot of the cluster's etcd to FILE (admin only)",
		Long: `snapshot streams a consistent snapshot of etcd from the node (the first one given) into FILE.part,
checks its SHA-256 against the one the node computed, and only then renames it to FILE. The snapshot holds
every Secret of the cluster: FILE is created readable by you alone. 'cairnctl init --etcd-snapshot FILE'
starts a new cluster from it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			node, size, sum, err := g.fetchToFile(path, force, func(nc nodeClient) (func() (*machine.DataChunk, error), error) {
				s, err := nc.EtcdSnapshot(cmd.Context(), &machine.EtcdSnapshotRequest{})
				if err != nil {
					return nil, err
				}
				return s.Recv, nil
			})
			if err != nil {
				return err
			}
			if g.output == "json" {
				return json.NewEncoder(g.stdout).Encode(map[string]any{"file": path, "node": node, "size": size, "sha256": sum})
			}
			fmt.Fprintf(g.stdout, "wrote %s from node %s: %s (%d bytes), sha256 %s\n", path, node, humanSize(uint64(size)), size, sum)
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "overwrite FILE")
	return c
}

// checkTarget refuses to overwrite a file unless told to.
func checkTarget(path string, force bool) error {
	_, err := os.Stat(path)
	switch {
	case err == nil && !force:
		return fmt.Errorf("%s exists; pass --force to overwrite it", path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	return nil
}

// fetchToFile streams a file from the first node given into path, refusing to overwrite it without force:
// open starts the node's stream, saveSnapshot writes and verifies it. It returns the node's name.
func (g *globals) fetchToFile(path string, force bool, open func(nodeClient) (func() (*machine.DataChunk, error), error)) (node string, size int64, sum string, err error) {
	if err := checkTarget(path, force); err != nil {
		return "", 0, "", err
	}
	ncs, closeAll, err := g.clients()
	if err != nil {
		return "", 0, "", err
	}
	defer closeAll()
	nc := ncs[0]
	recv, err := open(nc)
	if err != nil {
		return "", 0, "", err
	}
	if size, sum, err = saveSnapshot(recv, path, g.stderr); err != nil {
		return "", 0, "", fmt.Errorf("node %s: %s", nc.name, describe(err))
	}
	return nc.name, size, sum, nil
}

// progressEvery paces the progress lines of a long transfer.
const progressEvery = 5 * time.Second

// saveSnapshot writes the chunks to path+".part", checks the checksum the last chunk carries against the
// bytes received, and renames the file to path. On any failure it removes the partial file: a snapshot that
// does not verify is never left where a restore could take it.
func saveSnapshot(recv func() (*machine.DataChunk, error), path string, progress io.Writer) (size int64, sum string, err error) {
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(part)
		}
	}()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	start, last := time.Now(), time.Now()
	for {
		c, rerr := recv()
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return 0, "", rerr
		}
		if sum != "" {
			return 0, "", errors.New("the node sent data after the checksum; snapshot discarded")
		}
		if _, err := w.Write(c.Data); err != nil {
			return 0, "", fmt.Errorf("write %s: %w", part, err)
		}
		size += int64(len(c.Data))
		sum = c.Sha256
		if time.Since(last) >= progressEvery {
			fmt.Fprintf(progress, "received %s in %s\n", humanSize(uint64(size)), time.Since(start).Round(time.Second))
			last = time.Now()
		}
	}
	if sum == "" {
		return 0, "", errors.New("the node ended the snapshot without its checksum; snapshot discarded")
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return 0, "", fmt.Errorf("checksum mismatch: the node sent sha256 %s, the bytes received hash to %s; snapshot discarded", sum, got)
	}
	if err := f.Sync(); err != nil {
		return 0, "", fmt.Errorf("write %s: %w", part, err)
	}
	if err := f.Close(); err != nil {
		return 0, "", fmt.Errorf("write %s: %w", part, err)
	}
	if err := os.Rename(part, path); err != nil {
		return 0, "", err
	}
	return size, sum, nil
}
