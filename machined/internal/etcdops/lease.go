package etcdops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// A key held under a lease: what the control planes' election of the API's virtual IP is built on. The
// holder writes the key only if nobody has (a transaction on the key's create revision), attached to
// its lease, and keeps the lease alive; when it stops renewing, etcd deletes the key with the lease,
// and the next claim succeeds.

// ErrLeaseGone says etcd no longer has the lease: it expired, or was revoked.
var ErrLeaseGone = errors.New("the etcd lease expired")

// Session is a run of calls over one HTTPS connection: a lease renewed every few seconds must not pay a
// TLS handshake each time. Close it when done.
type Session struct {
	c  *Client
	hc *http.Client
}

// Session opens a session.
func (c *Client) Session() (*Session, error) {
	// A holder of the virtual IP keeps several renewals out while etcd answers late (vip.Holder), each
	// on a connection of its own: keep them all for the next round instead of the transport's two.
	hc, err := c.httpClient(sessionConns)
	if err != nil {
		return nil, err
	}
	return &Session{c: c, hc: hc}, nil
}

// sessionConns is how many idle connections a session keeps.
const sessionConns = 8

// Close drops the session's connections.
func (s *Session) Close() { s.hc.CloseIdleConnections() }

type leaseRequest struct {
	TTL int64 `json:"TTL,string,omitempty"`
	ID  int64 `json:"ID,string,omitempty"`
}

type leaseResponse struct {
	ID  int64 `json:"ID,string"`
	TTL int64 `json:"TTL,string"`
}

// GrantLease makes a lease of ttl (whole seconds) and returns its ID.
func (s *Session) GrantLease(ctx context.Context, ttl time.Duration) (int64, error) {
	var r leaseResponse
	if err := s.c.call(ctx, s.hc, "/v3/lease/grant", leaseRequest{TTL: int64(ttl / time.Second)}, &r); err != nil {
		return 0, s.c.unavailable(ctx, fmt.Errorf("grant a lease: %w", err))
	}
	if r.ID == 0 {
		return 0, s.c.unavailable(ctx, errors.New("grant a lease: etcd returned no lease ID"))
	}
	return r.ID, nil
}

// KeepAlive renews the lease once and returns the time it has left; ErrLeaseGone when etcd no longer
// has it.
func (s *Session) KeepAlive(ctx context.Context, id int64) (time.Duration, error) {
	var r struct {
		Result *leaseResponse `json:"result"`
		Error  *StatusError   `json:"error"`
	}
	if err := s.c.call(ctx, s.hc, "/v3/lease/keepalive", leaseRequest{ID: id}, &r); err != nil {
		return 0, s.c.unavailable(ctx, fmt.Errorf("renew lease %x: %w", id, err))
	}
	if r.Error != nil {
		return 0, s.c.unavailable(ctx, fmt.Errorf("renew lease %x: %w", id, r.Error))
	}
	if r.Result == nil || r.Result.TTL <= 0 {
		return 0, ErrLeaseGone
	}
	return time.Duration(r.Result.TTL) * time.Second, nil
}

// txn messages: the gateway takes protobuf's field names and encodes bytes as base64.
type compare struct {
	Key            []byte `json:"key"`
	Target         string `json:"target"`
	Result         string `json:"result"`
	CreateRevision *int64 `json:"create_revision,string,omitempty"`
	ModRevision    *int64 `json:"mod_revision,string,omitempty"`
	Value          []byte `json:"value,omitempty"`
}

type requestOp struct {
	Put         *putRequest `json:"request_put,omitempty"`
	Range       *keyRequest `json:"request_range,omitempty"`
	DeleteRange *keyRequest `json:"request_delete_range,omitempty"`
}

type putRequest struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
	Lease int64  `json:"lease,string"`
}

type keyRequest struct {
	Key []byte `json:"key"`
}

type txnRequest struct {
	Compare []compare   `json:"compare"`
	Success []requestOp `json:"success"`
	Failure []requestOp `json:"failure,omitempty"`
}

type rangeResponse struct {
	Kvs []keyValue `json:"kvs"`
}

// keyValue is a key's value with the lease it is attached to and its last change, in both spellings of
// the gateway's versions.
type keyValue struct {
	Value            []byte `json:"value"`
	Lease            int64  `json:"lease,string"`
	ModRevision      int64  `json:"mod_revision,string"`
	ModRevisionCamel int64  `json:"modRevision,string"`
}

func (kv keyValue) modRevision() int64 { return max(kv.ModRevision, kv.ModRevisionCamel) }

// responseOp accepts both spellings etcd's gateway versions use for the field names.
type responseOp struct {
	Range      *rangeResponse `json:"response_range"`
	RangeCamel *rangeResponse `json:"responseRange"`
}

type txnResponse struct {
	Succeeded bool         `json:"succeeded"`
	Responses []responseOp `json:"responses"`
}

// Claim writes key = value under the lease unless the key exists, and returns who holds the key
// afterwards: value when the claim won, the holder's value otherwise ("" if the key vanished meanwhile).
// A key that already holds value under another lease (this node's own claim of an earlier round, which
// ended without releasing it) is moved to this lease: otherwise the key would go when that lease expires,
// while this node, renewing only the new one, went on holding.
func (s *Session) Claim(ctx context.Context, key, value string, lease int64) (string, error) {
	zero := int64(0)
	kv, won, err := s.txn(ctx, key, compare{Key: []byte(key), Target: "CREATE", Result: "EQUAL", CreateRevision: &zero}, value, lease)
	if err != nil {
		return "", err
	}
	if won {
		return value, nil
	}
	if kv == nil || string(kv.Value) != value || kv.Lease == lease {
		return holder(kv), nil
	}
	rev := kv.modRevision()
	kv, won, err = s.txn(ctx, key, compare{Key: []byte(key), Target: "MOD", Result: "EQUAL", ModRevision: &rev}, value, lease)
	if err != nil {
		return "", err
	}
	if won {
		return value, nil
	}
	return holder(kv), nil
}

// txn puts key = value under the lease if cmp holds; otherwise it returns the key as it is (nil if absent).
func (s *Session) txn(ctx context.Context, key string, cmp compare, value string, lease int64) (*keyValue, bool, error) {
	req := txnRequest{
		Compare: []compare{cmp},
		Success: []requestOp{{Put: &putRequest{Key: []byte(key), Value: []byte(value), Lease: lease}}},
		Failure: []requestOp{{Range: &keyRequest{Key: []byte(key)}}},
	}
	var r txnResponse
	if err := s.c.call(ctx, s.hc, "/v3/kv/txn", req, &r); err != nil {
		return nil, false, s.c.unavailable(ctx, fmt.Errorf("claim %s: %w", key, err))
	}
	if r.Succeeded {
		return nil, true, nil
	}
	for _, op := range r.Responses {
		rr := op.Range
		if rr == nil {
			rr = op.RangeCamel
		}
		if rr != nil && len(rr.Kvs) > 0 {
			return &rr.Kvs[0], false, nil
		}
	}
	return nil, false, nil
}

func holder(kv *keyValue) string {
	if kv == nil {
		return ""
	}
	return string(kv.Value)
}

// Release deletes key if it still holds value, then revokes the lease: the next claim succeeds at once
// instead of after the lease's time-to-live.
func (s *Session) Release(ctx context.Context, key, value string, lease int64) error {
	req := txnRequest{
		Compare: []compare{{Key: []byte(key), Target: "VALUE", Result: "EQUAL", Value: []byte(value)}},
		Success: []requestOp{{DeleteRange: &keyRequest{Key: []byte(key)}}},
	}
	if err := s.c.call(ctx, s.hc, "/v3/kv/txn", req, nil); err != nil {
		return s.c.unavailable(ctx, fmt.Errorf("release %s: %w", key, err))
	}
	if err := s.c.call(ctx, s.hc, "/v3/lease/revoke", leaseRequest{ID: lease}, nil); err != nil {
		return s.c.unavailable(ctx, fmt.Errorf("revoke lease %s: %w", strconv.FormatInt(lease, 16), err))
	}
	return nil
}
