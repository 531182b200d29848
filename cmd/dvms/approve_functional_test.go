//go:build functional

package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/bus/auth"
	ctlproto "github.com/dvms-project/dvms/scheduler/control"
)

// approveAndExplain checks an operator's decisions on advised plans and
// `dvms explain` on the real Nova, with the running fleet (TestFunctionalAgents
// shares its cloud, servers and agents) and the operator key up.sh
// provisions. In advise mode, hot[0], hot[0..1], then hot[0..2] are
// overloaded in turn, each host's first event giving a fresh plan (an
// agent in advise mode plans the same event again only after a backoff
// that doubles):
//  1. one of hot[0]'s plan's servers is live-migrated by hand (the stock
//     openstack CLI); `dvms plans approve` of that plan is refused with
//     the server's reason (server_changed) and Nova lists no new
//     migration; `dvms explain SERVER` says it was skipped and the plan
//     refused;
//  2. hot[1]'s plan rejected: dropped, no longer approvable;
//  3. hot[2]'s plan approved: executed although the region is in advise
//     mode: Nova lists a completed live migration of each of its servers
//     to the planned destination and none other, `dvms events` records
//     them done with Nova's request ids, and `dvms explain SERVER` says
//     moved, approved;
//  4. left is excluded (dvms exclude) and overloaded: its agent raises no
//     event and `dvms explain left` says why (left alone, excluded), in
//     -f json and in the table.
//
// The region is left with no demand, every host included, in enforce
// mode.
func (w *world) approveAndExplain(f *fleet, bin string, hot [3]string, left string) {
	t := w.t
	key := w.operatorKey()
	// signed sends `dvms WORDS… --key KEY ARGS…` (nwords command words).
	signed := func(nwords int, args ...string) ([]byte, error) {
		return w.dvms(bin, slices.Concat(args[:nwords], []string{"--key", key}, args[nwords:])...)
	}
	mustSigned := func(nwords int, args ...string) {
		t.Helper()
		if out, err := signed(nwords, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	t.Cleanup(func() {
		w.writeDemand(nil)
		for _, args := range [][]string{{"include", left}, {"mode", ctlproto.ModeEnforce}} {
			if out, err := signed(1, args...); err != nil {
				t.Errorf("cleanup: %v\n%s", err, out)
			}
		}
	})
	explain := func(target string) []explained {
		t.Helper()
		out, err := w.dvms(bin, "explain", target)
		var rows []explained
		if err != nil || json.Unmarshal(out, &rows) != nil {
			t.Fatalf("dvms explain %s: %v\n%s", target, err, out)
		}
		return rows
	}
	has := func(rows []explained, f func(explained) bool) bool { return slices.ContainsFunc(rows, f) }
	// advised waits for an advised plan for the overload of host whose
	// every move holds and moves a server from where Nova has it.
	advised := func(host string) advisedPlan {
		t.Helper()
		var got advisedPlan
		if !w.eventually("advised plan for the overload of "+host, 2*time.Minute, func() bool {
			out, err := w.dvms(bin, "plans", "--host", host)
			var ps []advisedPlan
			if err != nil || json.Unmarshal(out, &ps) != nil {
				t.Fatalf("dvms plans: %v\n%s", err, out)
			}
			on := map[string]string{}
			for h, ss := range w.placement() {
				for _, s := range ss {
					on[s.ID] = h
				}
			}
			for _, p := range ps {
				if p.Host == host && len(p.Moves) > 0 && !slices.ContainsFunc(p.Moves, func(m map[string]string) bool {
					return on[m["server"]] != m["from"] || m["recheck"] != "holds"
				}) {
					got = p
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no advised plan for the overload of %s after 2 min; agent logs in %s", host, f.logDir)
		}
		return got
	}

	// 1. Advised, then a server moved by hand: the approval is refused.
	mustSigned(1, "mode", ctlproto.ModeAdvise)
	w.overloadOnly(hot[0])
	stale := advised(hot[0])
	w.overloadOnly(hot[0], hot[1]) // hot[1]'s plan comes while the operator moves a server
	moved := stale.Moves[0]["server"]
	t.Logf("advised plan %s: %v; moving %s by hand", stale.Event, stale.Moves, moved)
	w.osc("server", "migrate", "--live-migration", moved)
	var where string
	if !w.eventually(moved+" live-migrated by hand", 2*time.Minute, func() bool {
		s, err := w.fc.cl.Server(w.ctx, moved)
		where = s.Host
		return err == nil && s.Host != hot[0] && s.Status == "ACTIVE" && s.TaskState == ""
	}) {
		t.Fatalf("%s not moved off %s by the operator's live migration (on %q)", moved, hot[0], where)
	}
	before := w.lastMigration()
	out, err := signed(2, "plans", "approve", stale.Event)
	if err == nil || !strings.Contains(string(out), "refused") || !strings.Contains(err.Error(), moved) || !strings.Contains(err.Error(), "server_changed") {
		t.Fatalf("approval of plan %s after %s moved: want refused for %s [server_changed], got %v\n%s", stale.Event, moved, moved, err, out)
	}
	t.Logf("dvms plans approve %s (after %s moved to %s): %v", stale.Event, moved, where, err)
	var rows []explained
	if !w.eventually("dvms explain "+moved+" says skipped and refused", 30*time.Second, func() bool {
		rows = explain(moved)
		return has(rows, func(r explained) bool {
			return r.Event == stale.Event && r.Decision == "skipped, not moved" && r.Class == "server_changed" && strings.Contains(r.Why, "already moved")
		}) && has(rows, func(r explained) bool { return r.Event == stale.Event && r.Decision == "plan refused" })
	}) {
		t.Errorf("dvms explain %s does not say it was skipped (server_changed) and the plan refused:\n%s", moved, explainSummaryOf(rows))
	}
	t.Logf("EXPLAIN skipped %s:\n%s", moved, explainSummaryOf(rows))
	if ms := w.migrationsAfter(before); len(ms) > 0 {
		t.Fatalf("refused approval, yet Nova lists %d new migrations: %+v", len(ms), ms)
	}

	// 2. hot[1]'s plan, rejected: dropped.
	rejected := advised(hot[1])
	if out, err := signed(2, "plans", "reject", rejected.Event); err != nil || !strings.Contains(string(out), "rejected") {
		t.Fatalf("dvms plans reject %s: %v\n%s", rejected.Event, err, out)
	}
	if out, err := signed(2, "plans", "approve", rejected.Event); err == nil || !strings.Contains(err.Error(), "holds this advised plan") {
		t.Errorf("approval of rejected plan %s: want none holds it, got %v\n%s", rejected.Event, err, out)
	}

	// 3. hot[2]'s plan, approved: executed on Nova, recorded.
	w.overloadOnly(hot[:]...)
	good := advised(hot[2])
	before = w.lastMigration()
	approved := time.Now()
	if out, err := signed(2, "plans", "approve", good.Event); err != nil || !strings.Contains(string(out), "approved") {
		t.Fatalf("dvms plans approve %s: %v\n%s", good.Event, err, out)
	}
	dest := map[string]string{} // server -> "FROM -> TO"
	for _, m := range good.Moves {
		dest[m["server"]] = m["from"] + " " + m["to"]
	}
	ms := w.movesOff(hot[2], before)
	for _, m := range ms {
		if d, ok := dest[m.Server]; !ok || m.Source+" -> "+m.Dest != d {
			t.Errorf("Nova's migration %d of %s %s -> %s is not a move of approved plan %s: %v", m.ID, m.Server, m.Source, m.Dest, good.Event, good.Moves)
		}
		delete(dest, m.Server)
	}
	if len(dest) > 0 {
		t.Errorf("moves of approved plan %s Nova never ran: %v", good.Event, dest)
	}
	first := good.Moves[0]["server"]
	var problems []string
	if !w.eventually("approved plan recorded done", 30*time.Second, func() bool {
		problems = nil
		var evs []struct {
			Event   string
			Actions []map[string]string
		}
		if out, err := w.dvms(bin, "events", "--host", hot[2]); err != nil || json.Unmarshal(out, &evs) != nil {
			t.Fatalf("dvms events: %v\n%s", err, out)
		}
		done := map[string]bool{}
		for _, e := range evs {
			for _, a := range e.Actions {
				if e.Event == good.Event && a["outcome"] == "done" && a["nova_request_id"] != "" {
					done[a["server"]] = true
				}
			}
		}
		for _, m := range good.Moves {
			if !done[m["server"]] {
				problems = append(problems, "no done record with a Nova request id of "+m["server"])
			}
		}
		rows = explain(first)
		if !has(rows, func(r explained) bool {
			return r.Event == good.Event && r.Decision == "moved" && r.To == strings.TrimPrefix(good.Moves[0]["to"], "-> ")
		}) || !has(rows, func(r explained) bool { return r.Event == good.Event && r.Decision == "plan approved" }) {
			problems = append(problems, "dvms explain "+first+" says neither moved nor approved")
		}
		return len(problems) == 0
	}) {
		t.Errorf("approved plan %s: %v\n%s", good.Event, problems, explainSummaryOf(rows))
	}
	t.Logf("EXPLAIN moved %s:\n%s", first, explainSummaryOf(rows))
	t.Logf("APPROVE: plan %s refused after %s moved by hand (server_changed, Nova 0 migrations); plan %s rejected; plan %s approved in advise mode: %d live migrations completed %s after the approval",
		stale.Event, moved, rejected.Event, good.Event, len(ms), time.Since(approved).Round(100*time.Millisecond))

	// 4. A hot host left alone: excluded, then overloaded.
	mustSigned(1, "exclude", left)
	w.overloadOnly(left)
	if !w.eventually("dvms explain "+left+" says left alone, excluded", 2*time.Minute, func() bool {
		rows = explain(left)
		return has(rows, func(r explained) bool {
			return r.Decision == "left alone" && r.Class == "excluded" && strings.Contains(r.Why, "excluded by the operator") && strings.Contains(r.Detail, "overload holds")
		}) && has(rows, func(r explained) bool { return r.Decision == "now" && r.Class == "excluded" })
	}) {
		t.Fatalf("dvms explain %s does not say it is left alone, excluded:\n%s", left, explainSummaryOf(rows))
	}
	t.Logf("EXPLAIN left alone %s:\n%s", left, explainSummaryOf(rows))
	if out, err := w.dvms(bin, "explain", "-f", "table", left); err != nil || !strings.Contains(string(out), "left alone") || !strings.Contains(string(out), "excluded by the operator") {
		t.Errorf("dvms explain %s (table): %v\n%s", left, err, out)
	}
}

// operatorKey is the operator key up.sh provisions into the agents'
// keys_dir/operators.
func (w *world) operatorKey() string {
	w.t.Helper()
	cfg := w.agentConfig()
	pattern := filepath.Join(cfg.KeysDir, ctlproto.OperatorsDir, "*"+auth.SeedExt)
	keys, _ := filepath.Glob(pattern)
	if len(keys) == 0 {
		w.t.Fatalf("no operator key %s: devstack/functional/up.sh provisions one", pattern)
	}
	return keys[0]
}
