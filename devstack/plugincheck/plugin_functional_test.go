//go:build functional

// Package plugincheck_test runs the DevStack plugin check (run.sh): the
// plugin's phases with DevStack's own function library, in a Debian root
// booted with systemd as PID 1, as a node of the functional cloud.
package plugincheck_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// notRun skips loudly, or fails when DVMS_DEVSTACK_REQUIRED is set.
func notRun(t *testing.T, why string) {
	t.Helper()
	msg := "DEVSTACK PLUGIN TEST NOT RUN: " + why
	if os.Getenv("DVMS_DEVSTACK_REQUIRED") != "" {
		t.Fatal(msg + " (DVMS_DEVSTACK_REQUIRED is set)")
	}
	fmt.Fprintln(os.Stderr, "*** "+msg)
	t.Skip(msg)
}

// TestFunctionalDevStackPlugin: stack install, post-config, extra (units
// active, restarted on failure, reloaded, /healthz, dvms status, a drain
// through the agents), unstack and clean (nothing running, nothing left).
// DevStack itself is not part of dvms: DVMS_DEVSTACK_DIR names a checkout.
func TestFunctionalDevStackPlugin(t *testing.T) {
	if os.Getenv("DVMS_DEVSTACK_DIR") == "" {
		notRun(t, "DVMS_DEVSTACK_DIR is not set (a DevStack checkout; dvms does not fetch DevStack)")
	}
	if os.Geteuid() != 0 {
		notRun(t, "needs root (overlay mount, namespaces, cgroups)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "run.sh")
	cmd.Stdout = io.MultiWriter(&out, testWriter{t})
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if s := out.String(); err == nil && strings.Contains(s, "*** NOT RUN:") {
		notRun(t, s[strings.Index(s, "*** NOT RUN:"):])
	}
	if err != nil {
		t.Fatalf("run.sh: %v", err)
	}
	if !strings.Contains(out.String(), "the DevStack plugin check passed") {
		t.Fatal("run.sh exited 0 without saying the check passed")
	}
}

// testWriter logs run.sh's lines (not DevStack's xtrace: that is in the
// phases' logs) as they come.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if !strings.HasPrefix(l, "+") {
			w.t.Log(l)
		}
	}
	return len(p), nil
}
