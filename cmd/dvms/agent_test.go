package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `dvms agent` with a bad configuration stops at start and lists every
// problem, before touching NATS or Nova.
func TestAgentRefusesBadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "dvms")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	conf := filepath.Join(t.TempDir(), "dvms.conf")
	bad := "[consensus]\narbiter = local\nbind = no-port\nheartbeat_interval = 2\ndead_after = 3\n[monitor]\nsource = file\n"
	if err := os.WriteFile(conf, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "agent", "--host", "compute-1", "--config", conf).CombinedOutput()
	if err == nil {
		t.Fatalf("agent started with a bad configuration:\n%s", out)
	}
	for _, want := range []string{"arbiter = local", "bind", "dead_after", "file_path"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
}

func TestAdvertiseAddr(t *testing.T) {
	cases := []struct{ bind, adv, nats, want string }{
		{"0.0.0.0:7420", "10.0.0.5:7420", "nats://127.0.0.1:4222", "10.0.0.5:7420"},
		{"127.0.0.1:0", "", "nats://127.0.0.1:4222", ""}, // the service advertises what it bound
		{"0.0.0.0:7420", "", "nats://127.0.0.1:4222,nats://127.0.0.2:4222", "127.0.0.1:7420"},
		{":7420", "", "nats://127.0.0.1", "127.0.0.1:7420"},
		{"", "", "nats://127.0.0.1:4222", ""},
	}
	for _, c := range cases {
		got, err := advertiseAddr(c.bind, c.adv, c.nats)
		if err != nil || got != c.want {
			t.Errorf("advertiseAddr(%q, %q, %q) = %q, %v; want %q", c.bind, c.adv, c.nats, got, err, c.want)
		}
	}
	if _, err := advertiseAddr("0.0.0.0:7420", "", "::bad"); err == nil {
		t.Error("no error for an unusable NATS url")
	}
}

func TestEmbeddedConfig(t *testing.T) {
	ec, err := embeddedConfig("nats://127.0.0.1:4333")
	if err != nil || ec.Host != "127.0.0.1" || ec.Port != 4333 {
		t.Fatalf("%+v %v", ec, err)
	}
	if _, err := embeddedConfig("not a url"); err == nil {
		t.Fatal("accepted a bad url")
	}
}
