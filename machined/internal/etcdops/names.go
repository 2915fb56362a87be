package etcdops

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Control planes' addresses by node name, in etcd itself. An etcd member advertises its URLs by its node
// name, which every control plane resolves through /etc/hosts; the names must resolve on every member
// before a joining member has a Node object (the etcd leader, whichever member that is, sends the learner
// its log), so the address is recorded here: by the join service before it adds the learner, and by each
// control plane at each boot once its member is healthy (a node whose address changed). Every control
// plane reads them back into its /etc/hosts.

// NamesPrefix is where the addresses live: NamesPrefix + node name = address.
const NamesPrefix = "/cairn/names/"

type rangeRequest struct {
	Key      []byte `json:"key"`
	RangeEnd []byte `json:"range_end,omitempty"`
}

type kvRangeResponse struct {
	Kvs []struct {
		Key   []byte `json:"key"`
		Value []byte `json:"value"`
	} `json:"kvs"`
}

// PutName records that node name's member is at address.
func (c *Client) PutName(ctx context.Context, name, address string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("record the address of node %q: not a node name", name)
	}
	return c.with(ctx, func(ctx context.Context, hc *http.Client) error {
		req := putRequest{Key: []byte(NamesPrefix + name), Value: []byte(address)}
		if err := c.call(ctx, hc, "/v3/kv/put", req, nil); err != nil {
			return fmt.Errorf("record %s's address %s: %w", name, address, err)
		}
		return nil
	})
}

// Names are the recorded addresses of the cluster's members, by node name. A record whose member has
// left is not returned: a member counts while its name is the member's own or its peer URL's host (a
// learner that has not started yet has no name).
func (c *Client) Names(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	err := c.with(ctx, func(ctx context.Context, hc *http.Client) error {
		var list memberListResponse
		if err := c.call(ctx, hc, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
			return fmt.Errorf("member list: %w", err)
		}
		var kvs kvRangeResponse
		req := rangeRequest{Key: []byte(NamesPrefix), RangeEnd: prefixEnd(NamesPrefix)}
		if err := c.call(ctx, hc, "/v3/kv/range", req, &kvs); err != nil {
			return fmt.Errorf("read the members' addresses: %w", err)
		}
		for _, kv := range kvs.Kvs {
			name := strings.TrimPrefix(string(kv.Key), NamesPrefix)
			if slices.ContainsFunc(list.Members, func(m member) bool { return m.Name == name || peerHost(m, name) }) {
				out[name] = string(kv.Value)
			}
		}
		return nil
	})
	return out, err
}

// peerHost says whether one of m's peer URLs has host name.
func peerHost(m member, name string) bool {
	return slices.ContainsFunc(m.PeerURLs, func(s string) bool {
		u, err := url.Parse(s)
		return err == nil && u.Hostname() == name
	})
}

// prefixEnd is the end of etcd's range of keys that start with prefix.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}
