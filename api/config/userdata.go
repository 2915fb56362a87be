package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// A cloud platform's user data (or a NoCloud seed's) is a Cairn document, never a script: either a whole
// machine config, which the node inits itself with when it says `bootstrap: true`, or a join document, which
// tells a node the cluster to join by itself. Both are decoded as strictly as a config given to Init.

// KindJoinConfig is a join document.
const KindJoinConfig = "JoinConfig"

// MaxUserData bounds the user data a node reads: a control-plane config with its secrets is about 12 KiB.
const MaxUserData = 256 << 10

// JoinConfig tells a node which cluster to join by itself: the same three things as the kernel command
// line's cairn.join=, cairn.jointoken= and cairn.joinca=. `cairnctl gen userdata` writes one.
type JoinConfig struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
	// Endpoint is a control plane's join service, HOST[:PORT] (port 50001 by default).
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Token is a join token (`cairnctl join-token create`).
	Token string `yaml:"token" json:"token"`
	// CAHash is the SHA-256 of the cluster's machine CA certificate (hex, as `cairnctl join-token create`
	// prints it): the node joins only a join service whose certificate chains to it. "insecure" skips the
	// check, and the node says so in status.
	CAHash string `yaml:"caHash" json:"caHash"`
}

// UserData is a decoded user data document: exactly one of Config and Join is set.
type UserData struct {
	Config *MachineConfig
	Join   *JoinConfig
}

var caHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseUserData decodes user data strictly: a MachineConfig (validated, and it must say `bootstrap:
// true`, or the node would not know whether to init with it) or a JoinConfig. Anything else, an unknown
// field, or more than MaxUserData bytes is an error that names what is wrong; no part of the document is
// ever in the error, since it holds secrets.
func ParseUserData(data []byte) (UserData, error) {
	if len(data) > MaxUserData {
		return UserData{}, fmt.Errorf("the user data is %d bytes, more than the %d a node reads", len(data), MaxUserData)
	}
	var root yaml.Node
	if err := decodeOne(data, &root); err != nil {
		return UserData{}, fmt.Errorf("the user data is not a Cairn document (a script or cloud-config is not run): %w", err)
	}
	var head struct {
		Kind string `yaml:"kind"`
	}
	_ = root.Decode(&head)
	switch head.Kind {
	case KindMachineConfig:
		c, err := Parse(data)
		if err != nil {
			return UserData{}, err
		}
		if !c.Bootstrap {
			return UserData{}, errors.New("the user data is a MachineConfig without bootstrap: true: a node inits itself " +
				"only with a config that says so (to join a cluster, give a JoinConfig)")
		}
		if err := Validate(c); err != nil {
			return UserData{}, err
		}
		return UserData{Config: c}, nil
	case KindJoinConfig:
		var errs Errors
		checkHeader(&root, APIVersion, KindJoinConfig, &errs)
		unknownFields(&root, reflect.TypeFor[JoinConfig](), "", &errs)
		if len(errs) > 0 {
			return UserData{}, errs
		}
		var j JoinConfig
		if err := root.Decode(&j); err != nil {
			return UserData{}, fmt.Errorf("decode the join config: %w", err)
		}
		if err := validateJoinConfig(&j); err != nil {
			return UserData{}, err
		}
		return UserData{Join: &j}, nil
	default:
		return UserData{}, fmt.Errorf("the user data's kind is %q: want %s or %s", head.Kind, KindMachineConfig, KindJoinConfig)
	}
}

func validateJoinConfig(j *JoinConfig) error {
	var e Errors
	if host, port, err := net.SplitHostPort(j.Endpoint); err != nil {
		if j.Endpoint == "" || !validHostname(j.Endpoint) && net.ParseIP(j.Endpoint) == nil {
			e.add("endpoint", "%q is not HOST[:PORT] of a join service", j.Endpoint)
		}
	} else if host == "" || port == "" {
		e.add("endpoint", "%q is not HOST[:PORT] of a join service", j.Endpoint)
	}
	if j.Token == "" {
		e.add("token", "a join token is required (cairnctl join-token create)")
	}
	if j.CAHash != "insecure" && !caHash.MatchString(j.CAHash) {
		e.add("caHash", "must be the machine CA's SHA-256, 64 lowercase hex digits (cairnctl join-token create prints it), or \"insecure\"")
	}
	return e.orNil()
}

// InitUserData is the user data that inits a node with the machine config raw: the config with
// `bootstrap: true`. It refuses a config that does not validate, so a seed is never written that the node
// would refuse at boot.
func InitUserData(raw []byte) ([]byte, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if c.Machine.Type != TypeControlPlane {
		return nil, fmt.Errorf("machine.type is %s: only a control plane inits a cluster (a worker's user data is a join document)", c.Machine.Type)
	}
	c.Bootstrap = true
	if err := Validate(c); err != nil {
		return nil, err
	}
	return Marshal(c)
}

// JoinUserData is the join document for a node to join by itself: a join service's HOST[:PORT], a join
// token and the machine CA's hash (or "insecure").
func JoinUserData(endpoint, token, caHash string) ([]byte, error) {
	j := JoinConfig{APIVersion: APIVersion, Kind: KindJoinConfig, Endpoint: endpoint, Token: token, CAHash: caHash}
	if err := validateJoinConfig(&j); err != nil {
		return nil, err
	}
	return Marshal(j)
}
