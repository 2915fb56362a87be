// A stand-in for github.com/mwitkow/go-conntrack, which the kube binary links
// only because CoreDNS's metrics plugin imports prometheus/common/config,
// whose HTTP client configuration wraps its dialer with it. The original
// imports golang.org/x/net/trace, whose init serves /debug/requests through
// html/template: that reflection on method names made Go's linker keep every
// exported method of every type in kube (25.6 MB of 153.3). The kube wrapper
// (../go.mod) replaces it by this module; see conntrack.go for what differs.
module github.com/mwitkow/go-conntrack

go 1.26.8
