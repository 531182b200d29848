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

	"github.com/dvms-project/dvms/nova/openstack"
)

// funcCloud is the functional tier's cloud (devstack/functional/up.sh).
type funcCloud struct {
	name, file string
	dir        string // DVMS_FUNC_DIR
	cl         *openstack.Client
}

// functionalCloud connects to the functional cloud. Without one the test
// skips with a loud message, or fails when DVMS_FUNCTIONAL_REQUIRED is set
// (CI): see notRun.
func functionalCloud(t *testing.T, ctx context.Context) funcCloud {
	t.Helper()
	fc := funcCloud{name: os.Getenv("OS_CLOUD"), file: os.Getenv("OS_CLIENT_CONFIG_FILE"), dir: os.Getenv("DVMS_FUNC_DIR")}
	if fc.dir == "" {
		fc.dir = "/tmp/dvms-functional"
	}
	if fc.name == "" {
		fc.name = "dvms-functional"
	}
	if fc.file == "" {
		fc.file = filepath.Join(fc.dir, "clouds.yaml")
	}
	cfg := openstack.DefaultConfig(fc.name)
	cfg.CloudsFile = fc.file
	cl, err := openstack.New(ctx, cfg)
	if err != nil {
		notRun(t, fmt.Sprintf("no usable cloud %q in %s: %v", fc.name, fc.file, err))
	}
	fc.cl = cl
	return fc
}

// notRun stops a functional test whose environment is missing: loudly
// skipped, or failed when DVMS_FUNCTIONAL_REQUIRED is set (CI).
func notRun(t *testing.T, why string) {
	t.Helper()
	notRunUnless(t, "FUNCTIONAL TEST NOT RUN: ", "DVMS_FUNCTIONAL_REQUIRED", why)
}

// notRunUnless skips t loudly with label+why, or fails it when the
// environment variable required is set (CI).
func notRunUnless(t *testing.T, label, required, why string) {
	t.Helper()
	msg := label + why
	if os.Getenv(required) != "" {
		t.Fatal(msg + " (" + required + " is set)")
	}
	fmt.Fprintln(os.Stderr, "*** "+msg)
	t.Skip(msg)
}

// env is the environment of a command run against the cloud.
func (fc funcCloud) env(extra ...string) []string {
	// 2.91: what the agents use; the CLI needs >= 2.37 for --nic none.
	env := append(os.Environ(), "OS_CLOUD="+fc.name, "OS_CLIENT_CONFIG_FILE="+fc.file, "OS_COMPUTE_API_VERSION=2.91")
	// The NATS of the cloud admits only the region's keys, over TLS
	// (devstack/functional/up.sh): dvms's operator commands use the
	// observer key and the server's certificate.
	for v, f := range map[string]string{"DVMS_NATS_NKEY": "observer/ops.key", "DVMS_NATS_TLS_CA": "nats/cert.pem"} {
		if p := filepath.Join(fc.dir, f); fileExists(p) {
			env = append(env, v+"="+p)
		}
	}
	return append(env, extra...)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// osc runs the stock openstack CLI, as an operator would.
func (fc funcCloud) osc(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "openstack", args...)
	cmd.Env = fc.env()
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), fmt.Errorf("openstack %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return string(out), fmt.Errorf("openstack %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// dvmsBinary is $DVMS_BIN or a fresh build of this command.
func dvmsBinary(t *testing.T, ctx context.Context) string {
	t.Helper()
	if bin := os.Getenv("DVMS_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "dvms")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build dvms: %v\n%s", err, out)
	}
	return bin
}
