package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler/control"
)

// explained is one row of `dvms explain -f json`.
type explained struct {
	Event, Decision, Server, From, To, Class, Why, Detail string
}

// advisedPlan is one row of `dvms plans -f json`.
type advisedPlan struct {
	Event, Host string
	Moves       []map[string]string
}

// Two signed agents in advise mode on a simulated cloud over a real NATS
// server. An advised plan approved after one of its servers moved is
// refused with the reason and moves nothing; an unsigned approval is
// refused; a rejected plan is dropped; a fresh plan approved is executed
// by the agent's executor; `dvms explain` says, in words, why a server
// moved, why another was skipped, and why a hot host was left alone.
func TestPlanApprovalAndExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two agents for several seconds")
	}
	keys, obsKey, ns := signedRegion(t, "compute-1", "compute-2")
	alice := filepath.Join(keys, control.OperatorsDir, "alice.key")
	cloud := opsCloud(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Advise mode; an advised event is raised again after a short backoff
	// and planned again.
	cfg := func(c *daemon.Config) {
		c.KeysDir, c.NATSNkeyAuth, c.Runtime.Exec.DryRun = keys, true, true
		c.Agent.RetryBackoff, c.Agent.MaxRetryBackoff = 500*time.Millisecond, 2*time.Second
	}
	a1 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-1", cfg)
	a2 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-2", cfg)
	defer func() {
		cancel()
		for _, a := range []*daemon.Proc{a1, a2} {
			if err := a.WaitClosed(); err != nil {
				t.Error(err)
			}
		}
	}()
	dvms := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		i := slices.IndexFunc(args, func(s string) bool { return strings.HasPrefix(s, "-") || s == "--" })
		if i < 0 {
			i = len(args)
		}
		// The command's words, then the connection flags, then the rest.
		full := append([]string{"dvms"}, args[:min(i, cmdWords(args))]...)
		full = append(full, "--nats-url", ns.ClientURL(), "--region", opsRegion, "--nats-nkey", obsKey)
		full = append(full, args[min(i, cmdWords(args)):]...)
		code := run(full, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	plan := func(ok func(advisedPlan) bool) advisedPlan {
		t.Helper()
		var got advisedPlan
		testwait.Until(t, 90*time.Second, "an advised plan", func() (bool, string) {
			code, out, errs := dvms("plans", "-f", "json")
			var ps []advisedPlan
			if code != 0 || json.Unmarshal([]byte(out), &ps) != nil {
				return false, out + errs
			}
			for _, p := range ps {
				if p.Host == "compute-1" && len(p.Moves) > 0 && ok(p) {
					got = p
					return true, ""
				}
			}
			return false, out
		})
		return got
	}
	explain := func(target string) []explained {
		t.Helper()
		code, out, errs := dvms("explain", "-f", "json", "--", target)
		var rows []explained
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("dvms explain %s: exit %d: %s%s", target, code, out, errs)
		}
		return rows
	}
	has := func(rows []explained, f func(explained) bool) bool { return slices.ContainsFunc(rows, f) }
	onHost := func(id string) string {
		s, err := cloud.Server(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Host
	}

	// 1. A plan whose first server moves (an operator's own migration)
	// before the approval: refused with the reason, nothing moved by dvms.
	stale := plan(func(advisedPlan) bool { return true })
	moved := stale.Moves[0]["server"]
	if _, err := cloud.LiveMigrate(ctx, moved, "compute-2"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, moved+" moved by hand", func() (bool, string) {
		h := onHost(moved)
		return h == "compute-2", h
	})
	// compute-1 stays overloaded without it (4 × 2.2 of 8 cores), and
	// one more move fixes it (compute-2: 2 + 2 + 2.2).
	for _, s := range cloud.ServersOn("compute-1") {
		if err := cloud.SetDemand(s.ID, nova.Demand{CPU: 2.2, RAMMB: 512}); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errs := dvms("plans", "approve", stale.Event); code != exitFailed || !strings.Contains(errs, "not signed") {
		t.Errorf("unsigned approval: exit %d, want %d and \"not signed\":\n%s%s", code, exitFailed, out, errs)
	}
	started := cloud.Stats().Started
	code, out, errs := dvms("plans", "approve", "--key", alice, stale.Event)
	if code != exitFailed || !strings.Contains(out, "refused") || !strings.Contains(errs, moved) || !strings.Contains(errs, "server_changed") {
		t.Errorf("approval of a plan whose server moved: exit %d, want %d, refused for %s [server_changed]:\n%s%s", code, exitFailed, moved, out, errs)
	}
	if st := cloud.Stats(); st.Started != started {
		t.Errorf("a refused approval started %d migrations", st.Started-started)
	}
	rows := explain(moved)
	if !has(rows, func(r explained) bool {
		return r.Event == stale.Event && r.Decision == "skipped, not moved" && r.Class == "server_changed" && strings.Contains(r.Why, "already moved")
	}) || !has(rows, func(r explained) bool { return r.Event == stale.Event && r.Decision == "plan refused" }) {
		t.Errorf("dvms explain %s does not say it was skipped for server_changed and the plan refused: %+v", moved, rows)
	}
	t.Logf("dvms explain %s:\n%s", moved, explainSummaryOf(rows))

	// 2. A fresh plan, rejected: dropped, and not approvable after.
	onC1 := func(p advisedPlan) bool {
		for _, m := range p.Moves {
			if m["server"] == moved || onHost(m["server"]) != "compute-1" {
				return false
			}
		}
		return p.Event != stale.Event
	}
	rejected := plan(onC1)
	if code, out, errs := dvms("plans", "reject", "--key", alice, rejected.Event); code != 0 || !strings.Contains(out, "rejected") {
		t.Errorf("dvms plans reject: exit %d:\n%s%s", code, out, errs)
	}
	if code, _, errs := dvms("plans", "approve", "--key", alice, rejected.Event); code != exitFailed || !strings.Contains(errs, "holds this advised plan") {
		t.Errorf("approval of a rejected plan: exit %d, want %d, none holds it:\n%s", code, exitFailed, errs)
	}

	// 3. Another fresh plan, approved: executed through the executor.
	good := plan(func(p advisedPlan) bool { return onC1(p) && p.Event != rejected.Event })
	code, out, errs = dvms("plans", "approve", "--key", alice, good.Event)
	if code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("dvms plans approve %s: exit %d:\n%s%s", good.Event, code, out, errs)
	}
	t.Logf("dvms plans approve:\n%s", out)
	first := good.Moves[0]
	dest := strings.TrimPrefix(first["to"], "-> ")
	testwait.Until(t, time.Minute, "the approved plan's first move done", func() (bool, string) {
		h := onHost(first["server"])
		return h == dest, fmt.Sprintf("%s on %s", first["server"], h)
	})
	testwait.Until(t, 30*time.Second, "dvms explain says it moved", func() (bool, string) {
		rows = explain(first["server"])
		return has(rows, func(r explained) bool {
			return r.Event == good.Event && r.Decision == "moved" && r.To == dest
		}) && has(rows, func(r explained) bool { return r.Event == good.Event && r.Decision == "plan approved" }), explainSummaryOf(rows)
	})
	t.Logf("dvms explain %s:\n%s", first["server"], explainSummaryOf(rows))
	// Decided plans are no longer listed.
	if _, out, _ := dvms("plans", "-f", "json"); strings.Contains(out, good.Event) || strings.Contains(out, rejected.Event) {
		t.Errorf("dvms plans still lists a decided plan:\n%s", out)
	}

	// 4. A hot host left alone: paused, compute-1 overloaded again raises
	// no event and its agent says why.
	if code, out, errs := dvms("pause", "--key", alice); code != 0 {
		t.Fatalf("dvms pause: exit %d:\n%s%s", code, out, errs)
	}
	for _, s := range cloud.ServersOn("compute-1") {
		if err := cloud.SetDemand(s.ID, nova.Demand{CPU: 8, RAMMB: 512}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, time.Minute, "dvms explain compute-1 says it is left alone, paused", func() (bool, string) {
		rows = explain("compute-1")
		return has(rows, func(r explained) bool {
			return r.Decision == "left alone" && r.Class == "paused" && strings.Contains(r.Detail, "overload holds")
		}) && has(rows, func(r explained) bool { return r.Decision == "now" && r.Class == "paused" }), explainSummaryOf(rows)
	})
	t.Logf("dvms explain compute-1:\n%s", explainSummaryOf(rows))
	code, out, errs = dvms("explain", "--", "compute-1")
	if code != 0 || !strings.Contains(out, "left alone") {
		t.Errorf("dvms explain compute-1 (table): exit %d:\n%s%s", code, out, errs)
	}
	if code, _, errs := dvms("explain", "--", "no-such-thing"); code != exitFailed || !strings.Contains(errs, "nothing in the journals") {
		t.Errorf("dvms explain of an unknown name: exit %d: %s", code, errs)
	}
}

// cmdWords is how many leading words of args name the command (dvms
// plans approve: 2).
func cmdWords(args []string) int {
	if len(args) > 1 && args[0] == "plans" && (args[1] == "approve" || args[1] == "reject") {
		return 2
	}
	return 1
}

func explainSummaryOf(rows []explained) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %s %s %s [%s] %s -- %s\n", r.Event, r.Decision, r.Server, r.Class, r.Why, r.Detail)
	}
	return b.String()
}
