package client

import (
	"time"

	"google.golang.org/grpc/keepalive"
)

// A stream that waits on a node (Init, Join, an upgrade, logs --follow) must end when the node goes away,
// not when its deadline does. A node that resets mid-sequence (its hardware watchdog, a power cut) sends
// no FIN, and some paths keep the host's end of the connection open by themselves (QEMU's user network
// does): without pings, cluster create waited the whole 30 minutes of a dead Init stream while the node
// had reset and come back to Running on its own.
//
// The client pings only while a call is open and the connection has been silent for KeepaliveTime, and
// gives up after KeepaliveTimeout without an answer: the call ends with codes.Unavailable, which create
// already takes as "follow the node over mutual TLS". A ping is answered by the server's transport, not
// by its handlers, so a busy node answers within a second even under emulation; 20 s is generous.
const (
	KeepaliveTime    = 20 * time.Second
	KeepaliveTimeout = 20 * time.Second
)

// ClientKeepalive is what Dial gives every connection to a node.
func ClientKeepalive() keepalive.ClientParameters {
	return keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}
}

// ServerKeepalivePolicy is what the node's machine API allows: gRPC's default (one ping per five
// minutes) would answer this client's pings with a GOAWAY ("too_many_pings") and end the very stream they
// keep. Half the client's interval leaves room for a late timer.
func ServerKeepalivePolicy() keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2}
}

// ServerKeepalive makes the node ping a client that has been silent for a while: a follow stream whose
// client vanished (a laptop closed) would otherwise hold its goroutines and its log subscription until
// the node reboots.
func ServerKeepalive() keepalive.ServerParameters {
	return keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: KeepaliveTimeout}
}
