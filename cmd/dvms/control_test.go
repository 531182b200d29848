package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/scheduler"
)

func cmdAt(op, host, mode string, at time.Time, id string) controlRecord {
	c := controlCommand{V: 1, ID: id, At: at, Op: op, Host: host, Mode: mode}
	raw, _ := json.Marshal(c)
	return controlRecord{cmd: c, raw: raw}
}

// Commands commute: agents that took the same commands in any order hold
// the same controls; a replay changes nothing; a host's mode wins over
// the region's, which wins over advise_only.
func TestControlsLastWriterWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []controlRecord{
		cmdAt(opPause, "", "", t0, "a"),
		cmdAt(opResume, "", "", t0.Add(time.Second), "b"),
		cmdAt(opPause, "", "", t0.Add(2*time.Second), "c"),
		cmdAt(opExclude, "c2", "", t0, "d"),
		cmdAt(opInclude, "c2", "", t0, "e"), // same time: the larger id wins
		cmdAt(opExclude, "c3", "", t0, "f"),
		cmdAt(opMode, "", modeAdvise, t0, "g"),
		cmdAt(opMode, "c4", modeEnforce, t0, "h"),
		cmdAt(opMode, "c5", modeEnforce, t0, "i"),
		cmdAt(opMode, "c5", modeRegion, t0.Add(time.Second), "j"),
	}
	want := controlView{Paused: true, Mode: modeAdvise, HostModes: map[string]string{"c4": modeEnforce}, Excluded: []string{"c3"}, Latest: t0.Add(2 * time.Second)}
	rng := rand.New(rand.NewSource(1))
	for range 20 {
		c := newControls(false)
		for _, i := range rng.Perm(len(recs)) {
			c.merge(recs[i])
		}
		if got := c.view(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("view %+v, want %+v", got, want)
		}
		if c.merge(recs[0]) || c.merge(recs[2]) {
			t.Fatal("a replayed command changed the controls")
		}
		if !c.Paused() || c.Excluded("c2") || !c.Excluded("c3") || !c.Advise("c1") || c.Advise("c4") || !c.Advise("c5") {
			t.Fatalf("paused %v excluded c2 %v c3 %v advise c1 %v c4 %v c5 %v", c.Paused(), c.Excluded("c2"), c.Excluded("c3"), c.Advise("c1"), c.Advise("c4"), c.Advise("c5"))
		}
	}
	if c := newControls(true); !c.Advise("c1") || c.Paused() || c.Excluded("c1") {
		t.Fatal("without a command: advise_only, not paused, nobody excluded")
	}
}

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
	keys := t.TempDir()
	for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
		if _, err := auth.GenerateKey(keys, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := auth.GenerateKey(filepath.Join(keys, operatorsDir), "alice"); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	if _, err := auth.GenerateKey(elsewhere, "mallory"); err != nil {
		t.Fatal(err)
	}
	alice, mallory := filepath.Join(keys, operatorsDir, "alice.key"), filepath.Join(elsewhere, "mallory.key")
	agentKey := filepath.Join(keys, "compute-2.key") // an agent's key is no operator's

	// NATS as `dvms nats-config` writes it (issue 10): the agents with
	// their own keys and permissions, the operator's tools with an
	// observer key (the key that signs a command is another matter: the
	// agents check that one).
	obs := t.TempDir()
	if _, err := auth.GenerateKey(obs, "ops"); err != nil {
		t.Fatal(err)
	}
	sc, err := natsServerConfig(keys, opsRegion, []string{filepath.Join(obs, "ops.pub")})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1, Users: sc.Users})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	cloud := opsCloud(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signed := func(c *fileConfig) { c.KeysDir, c.NATSNkeyAuth, c.Runtime.Exec.DryRun = keys, true, true }
	a1 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-1", signed)
	a2 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-2", signed)
	agents := []*agentProc{a1, a2}
	defer func() {
		cancel()
		for _, a := range agents {
			if err := a.wait(); err != nil {
				t.Error(err)
			}
		}
	}()
	dvms := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		args = append([]string{"dvms", args[0], "--nats-url", ns.ClientURL(), "--region", opsRegion, "--nats-nkey", filepath.Join(obs, "ops.key")}, args[1:]...)
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	waitUntil(t, 10*time.Second, "both agents hear each other", func() bool {
		return len(a1.member.Members()) == 2 && len(a2.member.Members()) == 2
	})

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
		if a1.controls.Paused() || a2.controls.Paused() {
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
	waitUntil(t, 10*time.Second, "compute-3 learns the controls", func() bool {
		return a3.controls.Paused() && a3.controls.Excluded("compute-2")
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
		if sm, ok := a1.runner.Summary(""); ok {
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
}

// A command signed long ago is refused when published (stale) but taken
// when a peer passes it on (it was verified when it was new, and its
// signature still holds); a tampered one is refused either way.
func TestControlCommandFreshness(t *testing.T) {
	dir := t.TempDir()
	op, err := auth.GenerateKey(dir, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := auth.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &controlService{region: "r", secure: true, ring: ring, window: 30 * time.Second, now: func() time.Time { return now }}
	old := now.Add(-time.Hour)
	payload, _ := json.Marshal(controlCommand{V: 1, ID: "x", At: old, Op: opPause})
	raw := op.Seal(bus.ControlSubject("r"), payload, old)
	if _, why := s.open(raw, true); !strings.HasPrefix(why, "stale") {
		t.Errorf("published an hour late: %q, want stale", why)
	}
	if r, why := s.open(raw, false); why != "" || r.by != "alice" || r.cmd.Op != opPause {
		t.Errorf("passed on: %+v, %q", r, why)
	}
	bad := slices.Clone(raw)
	bad[len(bad)-70] ^= 1
	for _, live := range []bool{true, false} {
		if _, why := s.open(bad, live); !strings.Contains(why, "bad-signature") {
			t.Errorf("tampered (live %v): %q", live, why)
		}
	}
	s.ring = nil // keys_dir without operators/
	if _, why := s.open(raw, false); !strings.Contains(why, "no operator key") {
		t.Errorf("no operator keys: %q", why)
	}
}
