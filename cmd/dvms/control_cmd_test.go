package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
)

// The operator's command line against a region of signed agents: only a
// command signed with an operator's key is taken (the others are refused
// with their reason); an agent that starts later learns the controls
// from its peers; paused, no event is raised and nothing moves; switched
// to enforce and resumed at run time, the overload is fixed without
// touching the excluded host.
func TestOperatorControls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three agents for several seconds")
	}
	keys, obsKey, ns := signedRegion(t, "compute-1", "compute-2", "compute-3")
	elsewhere := t.TempDir()
	if _, err := auth.GenerateKey(elsewhere, "mallory"); err != nil {
		t.Fatal(err)
	}
	alice, mallory := filepath.Join(keys, control.OperatorsDir, "alice.key"), filepath.Join(elsewhere, "mallory.key")
	agentKey := filepath.Join(keys, "compute-2.key") // an agent's key is no operator's

	cloud := opsCloud(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signed := func(c *daemon.Config) { c.KeysDir, c.NATSNkeyAuth, c.Runtime.Exec.DryRun = keys, true, true }
	a1 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-1", signed)
	a2 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-2", signed)
	agents := []*daemon.Proc{a1, a2}
	defer func() {
		cancel()
		for _, a := range agents {
			if err := a.WaitClosed(); err != nil {
				t.Error(err)
			}
		}
	}()
	dvms := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		// --timeout: a bound for a busy machine; the answers end the
		// wait once every member answered.
		args = append([]string{"dvms", args[0], "--nats-url", ns.ClientURL(), "--region", opsRegion, "--nats-nkey", obsKey, "--timeout", "20s"}, args[1:]...)
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	waitUntil(t, 30*time.Second, "both agents hear each other", func() bool {
		return len(a1.Members()) == 2 && len(a2.Members()) == 2
	})
	// The operator follows the journal with the region's keys: the
	// agents sign their updates, so each is shown, none dropped.
	var follow testlog.Buffer
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan int, 1)
	go func() {
		followed <- runContext(followCtx, []string{"dvms", "events", "--follow", "--nats-url", ns.ClientURL(), "--region", opsRegion,
			"--nats-nkey", obsKey, "--keys-dir", keys, "--timeout", "1s"}, &follow, &follow)
	}()
	// Its history printed, it follows: the other commands run after it
	// parsed its flags (the commands' flags are shared in one process).
	waitUntil(t, 30*time.Second, "dvms events --follow prints the history", func() bool { return follow.String() != "" })

	for _, tc := range []struct{ name, key, reason string }{
		{"unsigned", "", "not signed"},
		{"stranger's key", mallory, `signed by "mallory", which is not an operator's key`},
		{"an agent's key", agentKey, `signed by "compute-2", which is not an operator's key`},
	} {
		args := []string{"pause"}
		if tc.key != "" {
			args = append(args, "--key", tc.key)
		}
		code, out := dvms(args...)
		if code != exitFailed || strings.Count(out, tc.reason) < 2 || !strings.Contains(out, "refused by 2 of 2 agents") {
			t.Errorf("%s: exit %d, want %d and both agents' reason %q:\n%s", tc.name, code, exitFailed, tc.reason, out)
		}
		if a1.Registers().Paused() || a2.Registers().Paused() {
			t.Fatalf("%s: a refused command paused the region", tc.name)
		}
	}

	if code, out := dvms("pause", "--key", alice); code != 0 || strings.Count(out, "applied") != 2 {
		t.Fatalf("dvms pause: exit %d:\n%s", code, out)
	}
	if code, out := dvms("exclude", "--key", alice, "compute-2"); code != 0 {
		t.Fatalf("dvms exclude: exit %d:\n%s", code, out)
	}
	// A later agent learns both from its peers.
	a3 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-3", signed)
	agents = append(agents, a3)
	waitUntil(t, 30*time.Second, "compute-3 learns the controls", func() bool {
		return a3.Registers().Paused() && a3.Registers().Excluded("compute-2")
	})
	// Paused: no event raised while compute-1's monitor takes more than
	// a debounce window of samples of its overloaded host (K of N, 3 of
	// 5: unpaused, the window would have raised one), nothing moved. An
	// absence is watched for a number of samples, not for a guess of
	// wall time a loaded machine may spend on one.
	raised := sum(scrape(t, a1), "dvms_events_raised_total")
	window := scheduler.DefaultConfig("compute-1").N + 1
	seen := map[time.Time]bool{}
	testwait.Until(t, time.Minute, "compute-1 samples its host while paused", func() (bool, string) {
		if sm, ok := a1.Runner().Summary(""); ok {
			seen[sm.SampledAt] = true
		}
		return len(seen) > window, fmt.Sprintf("%d distinct samples of %d", len(seen), window+1)
	})
	if now := sum(scrape(t, a1), "dvms_events_raised_total"); now != raised {
		t.Errorf("paused, compute-1 raised %v events", now-raised)
	}
	if m := scrape(t, a2); sum(m, "dvms_paused") != 1 || sum(m, "dvms_excluded") != 1 {
		t.Error("compute-2's metrics do not say paused and excluded")
	}

	// Enforce at run time, then resume: the overload is fixed, through
	// compute-3 only.
	for _, args := range [][]string{{"mode", "--key", alice, "enforce"}, {"resume", "--key", alice}} {
		if code, out := dvms(args...); code != 0 || strings.Count(out, "applied") != 3 {
			t.Fatalf("dvms %s: exit %d:\n%s", args, code, out)
		}
	}
	waitUntil(t, 60*time.Second, "compute-1's overload fixed", func() bool {
		ss, _ := cloud.Servers(context.Background(), "compute-1")
		return len(ss) < 5 && cloud.Stats().Started > 0 && cloud.Stats().InFlight == 0
	})
	if ss, _ := cloud.Servers(context.Background(), "compute-2"); len(ss) != 1 {
		t.Errorf("compute-2 is excluded, yet it holds %d servers (1 before)", len(ss))
	}
	waitUntil(t, 20*time.Second, "dvms events --follow --keys-dir shows compute-1's signed updates", func() bool {
		return strings.Contains(follow.String(), "compute-1 ev-") && strings.Contains(follow.String(), " event-raised")
	})
	stopFollow()
	<-followed
	if strings.Contains(follow.String(), "update dropped") {
		t.Errorf("dvms events --follow --keys-dir dropped the agents' own updates:\n%s", follow.String())
	}
	if n := natsViolations.Load(); n != 0 {
		t.Errorf("the agents' NATS connections reported %d permission violations (a subject they use is not in bus.AgentPermissions)", n)
	}
	code, out := dvms("status", "-f", "json")
	var st struct {
		Control []map[string]any `json:"control"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Control) != 1 ||
		st.Control[0]["Paused"] != false || st.Control[0]["Mode"] != "enforce" || fmt.Sprint(st.Control[0]["Excluded"]) != "[compute-2]" ||
		st.Control[0]["Seen By"] != "compute-1 compute-2 compute-3" {
		t.Errorf("dvms status: exit %d, control %v:\n%s", code, st.Control, out)
	}
	// The agents sign their answers: verified against the region's keys,
	// each agent's own answer is taken and none dropped.
	code, out = dvms("status", "--keys-dir", keys, "-f", "json")
	var verified struct {
		Agents []map[string]any `json:"agents"`
	}
	if code != 0 || strings.Contains(out, "dropped") || json.Unmarshal([]byte(out), &verified) != nil || len(verified.Agents) != 3 {
		t.Errorf("dvms status --keys-dir: exit %d, %d agents:\n%s", code, len(verified.Agents), out)
	}
}
