//go:build functional

package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFunctionalDrain runs `dvms drain HOST --wait` and `dvms undrain HOST`
// on an empty host of the functional cloud (devstack/functional) and
// reads the service state back through the client.
func TestFunctionalDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fc := functionalCloud(t, ctx)
	cl := fc.cl
	hs, err := cl.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host := ""
	for i := len(hs) - 1; i >= 0 && host == ""; i-- {
		h := hs[i]
		if ss, err := cl.Servers(ctx, h.Name); err == nil && len(ss) == 0 && !h.Service.Disabled() {
			host = h.Name
		}
	}
	if host == "" {
		notRun(t, "no empty enabled host to drain in the functional cloud")
	}
	bin := dvmsBinary(t, ctx)
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = fc.env()
		out, err := cmd.CombinedOutput()
		t.Logf("dvms %s:\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	t.Cleanup(func() { _ = cl.SetServiceStatus(context.Background(), host, false, "") })

	out, err := run("drain", host, "--wait", "--poll", "1s", "--stall", "5s", "--reason", "dvms:maintenance functional")
	if err != nil || !strings.Contains(out, host+": empty") {
		t.Fatalf("drain: %v", err)
	}
	h, err := cl.Host(ctx, host)
	if err != nil || !h.Service.Disabled() || h.Service.DisabledReason != "dvms:maintenance functional" {
		t.Fatalf("after drain: %+v, %v", h.Service, err)
	}
	if _, err := run("undrain", host); err != nil {
		t.Fatalf("undrain: %v", err)
	}
	h, err = cl.Host(ctx, host)
	if err != nil || h.Service.Disabled() || h.Service.DisabledReason != "" {
		t.Fatalf("after undrain: %+v, %v", h.Service, err)
	}
	if _, err := run("drain", "dvms-no-such-host"); err == nil {
		t.Error("drain of an unknown host succeeded")
	}
}
