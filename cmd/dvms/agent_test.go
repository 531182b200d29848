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
