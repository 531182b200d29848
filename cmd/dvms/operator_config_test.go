package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/scheduler/control"
)

// The tests never read the machine's /etc/dvms/dvms.conf: a test that
// wants a default file points this at its own.
func init() { defaultConfigFile = filepath.Join(os.TempDir(), "dvms-test-no-default.conf") }

// withDefaultConfig makes text the operator commands' default
// configuration file for the test.
func withDefaultConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dvms.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	prev := defaultConfigFile
	defaultConfigFile = path
	t.Cleanup(func() { defaultConfigFile = prev })
	return path
}

// On a deployed controller `dvms status` and the run-time controls need
// no flag: [operator] in the default file names NATS, the observer key
// NATS admits, the signing key the agents take and the region.
func TestOperatorCommandsReadTheConfig(t *testing.T) {
	keys, obsKey, ns := signedRegion(t, "compute-1")
	ctx, cancel := context.WithCancel(context.Background())
	a := startOpsAgent(t, ctx, opsCloud(t, 1), ns.ClientURL(), "compute-1", func(c *daemon.Config) {
		c.KeysDir, c.NATSNkeyAuth, c.Runtime.Exec.DryRun = keys, true, true
	})
	defer func() {
		cancel()
		if err := a.WaitClosed(); err != nil {
			t.Error(err)
		}
	}()
	// The agent's own sections are there too, as on a host that runs
	// both: [operator] wins over [nats] url and [DEFAULT] region.
	withDefaultConfig(t, "[DEFAULT]\nregion = elsewhere\n[nats]\nurl = nats://127.0.0.1:1\n[operator]\n"+
		"nats_url = "+ns.ClientURL()+"\nnkey_seed = "+obsKey+"\n"+
		"signing_key = "+filepath.Join(keys, control.OperatorsDir, "alice.key")+"\nregion = "+opsRegion+"\n")
	dvms := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"dvms"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	// The agent answers once its status service is subscribed: on a busy
	// machine that may take longer than one status round.
	testwait.Until(t, 30*time.Second, "dvms status with no flag lists compute-1", func() (bool, string) {
		code, out, errOut := dvms("status", "-f", "json")
		var st struct {
			Agents []struct{ Host string } `json:"agents"`
		}
		ok := code == 0 && json.Unmarshal([]byte(out), &st) == nil && len(st.Agents) == 1 && st.Agents[0].Host == "compute-1"
		return ok, fmt.Sprintf("exit %d:\n%s%s", code, out, errOut)
	})
	if code, out, errOut := dvms("pause"); code != 0 || !strings.Contains(out, "applied") || !a.Registers().Paused() {
		t.Fatalf("dvms pause with no flag (signed by [operator] signing_key): exit %d, paused %t:\n%s%s", code, a.Registers().Paused(), out, errOut)
	}
	// A flag overrides the file: the region nobody runs answers nothing.
	if code, _, errOut := dvms("status", "--region", "nobody", "--timeout", "200ms"); code != exitFailed {
		t.Errorf("--region over [operator] region: exit %d, want %d (no agent):\n%s", code, exitFailed, errOut)
	}
	// So does the flag's environment variable.
	t.Setenv("DVMS_REGION", "nobody")
	if code, _, errOut := dvms("status", "--timeout", "200ms"); code != exitFailed {
		t.Errorf("DVMS_REGION over [operator] region: exit %d, want %d:\n%s", code, exitFailed, errOut)
	}
}

// A missing default file is no error (the flags' defaults apply); a
// missing file given with --config, or a bad file, is a configuration
// error (78); a bad flag value or output format a usage error (2).
func TestOperatorConfigErrors(t *testing.T) {
	dvms := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"dvms"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	noNATS := []string{"--nats-url", "nats://127.0.0.1:1", "--timeout", "100ms"}
	if code, out := dvms(append([]string{"status"}, noNATS...)...); code != exitFailed {
		t.Errorf("no default file: exit %d, want %d (NATS not there):\n%s", code, exitFailed, out)
	}
	missing := filepath.Join(t.TempDir(), "none.conf")
	if code, out := dvms(append([]string{"status", "--config", missing}, noNATS...)...); code != daemon.ExitConfig || !strings.Contains(out, missing) {
		t.Errorf("--config of a missing file: exit %d, want %d naming it:\n%s", code, daemon.ExitConfig, out)
	}
	for name, text := range map[string]string{
		"bad URL":          "[operator]\nnats_url = not a url\n",
		"missing key":      "[operator]\nsigning_key = /nonexistent/alice.key\n",
		"unknown option":   "[operator]\nnats_ulr = nats://127.0.0.1:4222\n",
		"unknown section":  "[operater]\nnats_url = nats://127.0.0.1:4222\n",
		"bad region":       "[operator]\nregion = Region One\n",
		"bad [nats] url":   "[nats]\nurl = nowhere\n",
		"bad [nats] tlsca": "[nats]\ntls_ca = /nonexistent/ca.pem\n",
	} {
		withDefaultConfig(t, text)
		if code, out := dvms("status", "--timeout", "100ms"); code != daemon.ExitConfig {
			t.Errorf("%s: exit %d, want %d:\n%s", name, code, daemon.ExitConfig, out)
		}
	}
	// A bad value of an agent's option is not the operator's business.
	withDefaultConfig(t, "[scheduler]\ncpu_overload = 7\n")
	if code, out := dvms(append([]string{"status"}, noNATS...)...); code != exitFailed {
		t.Errorf("bad [scheduler] option: exit %d, want %d:\n%s", code, exitFailed, out)
	}
	withDefaultConfig(t, "")
	for _, args := range [][]string{
		{"status", "--nats-url", "localhost:4222"},
		{"status", "--region", "Region One"},
		{"status", "--nats-nkey", "/nonexistent/ops.key"},
		{"status", "--nats-ca", "/nonexistent/ca.pem"},
		{"status", "--timeout", "soon"},
		{"status", "--timeout", "-1s"},
		{"status", "-f", "xml"},
		{"events", "-f", "csv"},
		{"plans", "--since", "last week"},
		{"pause", "--key", "/nonexistent/alice.key"},
		{"mode", "sometimes"},
		{"simulate", "-f", "xml"},
		{"simulate", "--hosts", "many"},
		{"simulate", "--kill-agents", "some"},
		{"bench", "-f", "xml"},
	} {
		// The flags given last win over noNATS's.
		line := append(append([]string{args[0]}, noNATS...), args[1:]...)
		if args[0] == "simulate" || args[0] == "bench" {
			line = args
		}
		if code, out := dvms(line...); code != exitUsage {
			t.Errorf("dvms %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, exitUsage, out)
		}
	}
	t.Setenv("DVMS_NATS_URL", "localhost:4222")
	if code, out := dvms("status", "--timeout", "100ms"); code != exitUsage {
		t.Errorf("DVMS_NATS_URL=localhost:4222: exit %d, want %d:\n%s", code, exitUsage, out)
	}
}

// placeholderRE is a placeholder of --help as urfave/cli writes it
// (--config FILE): capitals, maybe alternatives (advise|enforce).
var placeholderRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*([|:,.-][A-Z0-9_]+)*$`)

// Every flag that takes a value shows a placeholder in --help, never
// "value" nor a command quoted in its help.
func TestHelpPlaceholders(t *testing.T) {
	newApp(&bytes.Buffer{}, &bytes.Buffer{})
	var walk func(path string, cs []*cli.Command)
	walk = func(path string, cs []*cli.Command) {
		for _, c := range cs {
			name := path + " " + c.Name
			for _, f := range c.Flags {
				df, ok := f.(cli.DocGenerationFlag)
				if !ok || !df.TakesValue() {
					continue
				}
				usage := df.GetUsage()
				i := strings.Index(usage, "`")
				j := strings.Index(usage[i+1:], "`")
				if i < 0 || j < 0 || !placeholderRE.MatchString(usage[i+1:i+1+j]) {
					t.Errorf("dvms%s --%s: no placeholder in its usage (`NAME`): %q", name, f.Names()[0], usage)
				}
			}
			walk(name, c.Subcommands)
		}
	}
	walk("", commands)
}
