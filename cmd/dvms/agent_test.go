package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `dvms agent` with a bad configuration stops at start and lists every
// problem, before touching NATS or Nova.
func TestAgentRefusesBadConfig(t *testing.T) {
	// In process: main is os.Exit(run(os.Args, os.Stdout, os.Stderr)),
	// so run's exit code and output are the binary's (building the
	// binary cost this test 8 s of the unit tier).
	conf := filepath.Join(t.TempDir(), "dvms.conf")
	bad := "[consensus]\narbiter = local\nbind = no-port\nheartbeat_interval = 2\ndead_after = 3\n[monitor]\nsource = file\n"
	if err := os.WriteFile(conf, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if c := run([]string{"dvms", "agent", "--host", "compute-1", "--config", conf}, &b, &b); c == 0 {
		t.Fatalf("agent started with a bad configuration:\n%s", b.String())
	}
	out := b.String()
	for _, want := range []string{"arbiter = local", "bind", "dead_after", "file_path"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
}
