package auth

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dvms-project/dvms/bus"
	"github.com/nats-io/nats-server/v2/server"
)

// The written configuration is one nats-server itself parses into one
// nkey user per agent and observer, with the permissions dvms means.
func TestNATSConfigParsesAsNATSServerConfig(t *testing.T) {
	keys, obs := t.TempDir(), t.TempDir()
	for _, h := range []string{"compute-1", "compute-2"} {
		if _, err := GenerateKey(keys, h); err != nil {
			t.Fatal(err)
		}
	}
	o, err := GenerateKey(obs, "ops")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := GenerateKey(obs, "dash")
	if err != nil {
		t.Fatal(err)
	}
	api, err := GenerateKey(obs, "api")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NATSServerConfig(keys, "r1", map[string][]string{"observer": {filepath.Join(obs, "ops.pub")},
		"reader": {filepath.Join(obs, "dash.pub")}, "scheduler-api": {filepath.Join(obs, "api.pub")}})
	if err != nil {
		t.Fatal(err)
	}
	sc.Listen = "127.0.0.1:4333"
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(sc.Render()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server does not parse it: %v\n%s", err, sc.Render())
	}
	if len(opts.Nkeys) != 5 || opts.Port != 4333 {
		t.Fatalf("nkey users %d, port %d; want 5 users on 4333", len(opts.Nkeys), opts.Port)
	}
	for _, u := range opts.Nkeys {
		want := bus.AgentPermissions("r1", "compute-1")
		switch {
		case u.Nkey == o.PublicKey():
			want = bus.ObserverPermissions("r1", o.PublicKey())
		case u.Nkey == rd.PublicKey():
			want = bus.ReaderPermissions("r1", rd.PublicKey())
		case u.Nkey == api.PublicKey():
			want = bus.SchedulerAPIPermissions("r1")
		case u.Nkey == sc.Users[1].Nkey:
			want = bus.AgentPermissions("r1", "compute-2")
		}
		if u.Permissions == nil || !slices.Equal(u.Permissions.Publish.Allow, want.Publish) || !slices.Equal(u.Permissions.Subscribe.Allow, want.Subscribe) {
			t.Errorf("user %s: permissions %+v, want %+v", u.Nkey, u.Permissions, want)
		}
		if u.Nkey == api.PublicKey() && (u.Permissions.Publish == nil || !slices.Equal(u.Permissions.Publish.Deny, []string{">"})) {
			t.Errorf("scheduler-api may publish: %+v (no allow list is no limit to nats-server)", u.Permissions.Publish)
		}
	}
	// An observer key inside the keys directory would be taken for a host.
	if _, err := GenerateKey(keys, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := NATSServerConfig(keys, "r1", map[string][]string{"observer": {filepath.Join(keys, "ops.pub")}}); err == nil {
		t.Error("an observer key inside keys_dir was accepted")
	}
	// One key, two roles: nats-server would take one user per key.
	if _, err := NATSServerConfig(keys, "r1", map[string][]string{"observer": {filepath.Join(obs, "ops.pub")},
		"reader": {filepath.Join(obs, "ops.pub")}}); err == nil {
		t.Error("one key given two roles was accepted")
	}
}
