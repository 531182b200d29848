//go:build functional

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova/openstack"
)

// TestFunctionalDrain runs `dvms drain HOST --wait` and `dvms undrain HOST`
// on an empty host of the functional cloud (devstack/functional) and
// reads the service state back through the client.
func TestFunctionalDrain(t *testing.T) {
	cloud := os.Getenv("OS_CLOUD")
	if cloud == "" {
		cloud = "dvms-functional"
	}
	file := os.Getenv("OS_CLIENT_CONFIG_FILE")
	if file == "" {
		file = "/tmp/dvms-functional/clouds.yaml"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := openstack.DefaultConfig(cloud)
	cfg.CloudsFile = file
	cl, err := openstack.New(ctx, cfg)
	if err != nil {
		msg := fmt.Sprintf("FUNCTIONAL TIER NOT RUN: no usable cloud %q in %s: %v", cloud, file, err)
		if os.Getenv("DVMS_FUNCTIONAL_REQUIRED") != "" {
			t.Fatal(msg + " (DVMS_FUNCTIONAL_REQUIRED is set)")
		}
		fmt.Fprintln(os.Stderr, "*** "+msg)
		t.Skip(msg)
	}
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
		t.Skip("no empty enabled host to drain")
	}
	bin := os.Getenv("DVMS_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "dvms")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("build dvms: %v\n%s", err, out)
		}
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "OS_CLOUD="+cloud, "OS_CLIENT_CONFIG_FILE="+file)
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
