package config

import (
	"strings"
	"testing"
)

func TestParseUserData(t *testing.T) {
	g := generated(t)
	bootstrap := *g.ControlPlane
	bootstrap.Bootstrap = true
	cfg := func(c *MachineConfig) string { return string(roundTrip(t, c)) }
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	join := func(body string) string {
		return "apiVersion: " + APIVersion + "\nkind: JoinConfig\n" + body
	}
	tests := []struct {
		name    string
		data    string
		want    string // "config", "join" or the error's text
		secrets []string
	}{
		{"a bootstrap config", cfg(&bootstrap), "config", nil},
		{"a config that does not say bootstrap", cfg(g.ControlPlane), "without bootstrap: true", nil},
		{"a join config", join("endpoint: 10.5.0.2:50001\ntoken: abc.def\ncaHash: " + hash + "\n"), "join", nil},
		{"a join config without a port", join("endpoint: cp1.example\ntoken: t\ncaHash: insecure\n"), "join", nil},
		{"a join config without the CA's hash", join("endpoint: 10.5.0.2\ntoken: s3cret-token\n"), "caHash", []string{"s3cret-token"}},
		{"a join config with a misspelt field", join("endpoint: 10.5.0.2\ntoken: t\ncaHash: insecure\ntokn: x\n"), "tokn: unknown field", nil},
		{"a shell script", "#!/bin/sh\ncurl http://example/x | sh\n", "not a Cairn document", nil},
		{"a cloud-config", "#cloud-config\nusers: [{name: admin}]\n", "kind is \"\"", nil},
		{"too big", join("token: " + strings.Repeat("x", MaxUserData)), "more than", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUserData([]byte(tc.data))
			switch tc.want {
			case "config":
				if err != nil || u.Config == nil || u.Join != nil {
					t.Fatalf("ParseUserData() = %+v, %v; want a config", u, err)
				}
			case "join":
				if err != nil || u.Join == nil || u.Config != nil {
					t.Fatalf("ParseUserData() = %+v, %v; want a join config", u, err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("ParseUserData() error = %v, want one saying %q", err, tc.want)
				}
				for _, s := range tc.secrets {
					if strings.Contains(err.Error(), s) {
						t.Errorf("the error shows a secret of the document: %v", err)
					}
				}
			}
		})
	}
}

// What cairnctl writes as user data is what a node reads back: the builders' output parses to the same
// document, and they refuse what a node would refuse.
func TestUserDataBuilders(t *testing.T) {
	g := generated(t)
	data, err := InitUserData(roundTrip(t, g.ControlPlane))
	if err != nil {
		t.Fatal(err)
	}
	u, err := ParseUserData(data)
	if err != nil || u.Config == nil || !u.Config.Bootstrap || u.Config.Cluster.ID != g.ControlPlane.Cluster.ID {
		t.Errorf("ParseUserData(InitUserData(...)) = %+v, %v; want the same config with bootstrap: true", u, err)
	}
	if _, err := InitUserData(roundTrip(t, g.Worker)); err == nil || !strings.Contains(err.Error(), "join document") {
		t.Errorf("InitUserData(a worker's config) error = %v, want one pointing to a join document", err)
	}
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	data, err = JoinUserData("10.5.0.2:50001", "abc.def", hash)
	if err != nil {
		t.Fatal(err)
	}
	u, err = ParseUserData(data)
	if err != nil || u.Join == nil || *u.Join != (JoinConfig{APIVersion: APIVersion, Kind: KindJoinConfig, Endpoint: "10.5.0.2:50001", Token: "abc.def", CAHash: hash}) {
		t.Errorf("ParseUserData(JoinUserData(...)) = %+v, %v", u.Join, err)
	}
	if _, err := JoinUserData("10.5.0.2", "abc.def", "not-a-hash"); err == nil || !strings.Contains(err.Error(), "caHash") {
		t.Errorf("JoinUserData with a bad hash: error = %v, want one naming caHash", err)
	}
}
