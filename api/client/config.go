// Package client is the Go client of the machine API, used by cairnctl and the tests: the cairnconfig
// file, dialing with the bootstrap token (maintenance) or a client certificate (mutual TLS), and the role
// names carried in client certificates.
package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

// Roles, carried as the Organization of a client certificate.
const (
	RoleAdmin    = "cairn:admin"    // everything
	RoleOperator = "cairn:operator" // no reset, no secrets
	RoleReader   = "cairn:reader"   // read-only, no secrets
)

// ServerName is the DNS name every node's machine-API certificate carries, so clients verify the chain
// against the cluster's machine CA however they reach the node (an IP, a forwarded port, a load balancer).
const ServerName = "machine.cairn.internal"

// Ports: the machine API's and the join service's defaults (defined with the config, which names them).
const (
	MachinePort = config.MachinePort
	JoinPort    = config.JoinPort
)

// Config is a cairnconfig file: named contexts, each with endpoints and credentials.
type Config struct {
	Context  string              `yaml:"context"`
	Contexts map[string]*Context `yaml:"contexts"`
}

// Context is one cluster's endpoints and an identity.
type Context struct {
	Endpoints []string `yaml:"endpoints"`
	CA        string   `yaml:"ca"`   // PEM machine CA
	Cert      string   `yaml:"cert"` // PEM client certificate
	Key       string   `yaml:"key"`  // PEM client key
}

// DefaultConfigPath is $CAIRNCONFIG, else ~/.cairn/config.
func DefaultConfigPath() string {
	if p := os.Getenv("CAIRNCONFIG"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".cairnconfig"
	}
	return filepath.Join(home, ".cairn", "config")
}

// LoadConfig reads a cairnconfig file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(bytesReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("read cairnconfig %s: %w", path, err)
	}
	return &c, nil
}

// Current returns the selected context (name "" means the file's current one).
func (c *Config) Current(name string) (*Context, error) {
	if name == "" {
		name = c.Context
	}
	ctx, ok := c.Contexts[name]
	if !ok {
		names := make([]string, 0, len(c.Contexts))
		for n := range c.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no context %q in the cairnconfig (have: %v)", name, names)
	}
	return ctx, nil
}

// CAHash is what a node's cairn.joinca= takes to pin the join service to this context's machine CA: the
// hex SHA-256 of the CA's DER certificate.
func (c *Context) CAHash() (string, error) {
	ca, err := pki.ParseCert([]byte(strings.TrimSpace(c.CA) + "\n"))
	if err != nil {
		return "", fmt.Errorf("cairnconfig: the machine CA: %w", err)
	}
	sum := sha256.Sum256(ca.Raw)
	return hex.EncodeToString(sum[:]), nil
}

// Merge adds or replaces a context and makes it current.
func (c *Config) Merge(name string, ctx *Context) {
	if c.Contexts == nil {
		c.Contexts = map[string]*Context{}
	}
	c.Contexts[name] = ctx
	c.Context = name
}

// Save writes the config with owner-only permissions: it holds a private key.
func (c *Config) Save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// NewContext signs a client certificate with the given role from the machine CA.
func NewContext(machineCA pki.PEM, role string, endpoints []string, now time.Time) (*Context, error) {
	ca, err := machineCA.ParseCA()
	if err != nil {
		return nil, fmt.Errorf("machine CA: %w", err)
	}
	switch role {
	case RoleAdmin, RoleOperator, RoleReader:
	default:
		return nil, errors.New("role must be one of " + RoleAdmin + ", " + RoleOperator + ", " + RoleReader)
	}
	leaf, err := ca.Sign(pki.Request{CommonName: role, Organization: []string{role}, Client: true}, now)
	if err != nil {
		return nil, err
	}
	return &Context{Endpoints: endpoints, CA: string(machineCA.Cert), Cert: string(leaf.Cert), Key: string(leaf.Key)}, nil
}
