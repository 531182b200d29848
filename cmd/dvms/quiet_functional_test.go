//go:build functional

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 9, "Done when" 1: idle agents cost at most restPerAgent nova-api +
// placement requests per agent per minute, plus restRegion for the whole
// region (the maintenance watch), above the cloud's own baseline.
const (
	restPerAgent = 2.0
	restRegion   = 30.0
)

// The measurement windows (DVMS_FUNC_BASELINE_WINDOW and
// DVMS_FUNC_IDLE_WINDOW override them, e.g. to iterate; CI keeps these).
// The baseline is periodic with a 60 s period (each nova-compute's
// resource tracker), so one minute holds one period of every host; the
// idle window is the minimum, two minutes, so that every agent's
// slow refresh (60 s by default) falls in it at least once.
var (
	baselineWindow = envDuration("DVMS_FUNC_BASELINE_WINDOW", time.Minute)
	idleWindow     = envDuration("DVMS_FUNC_IDLE_WINDOW", 2*time.Minute)
)

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "*** %s=%q is not a duration: using %s\n", name, v, def)
	}
	return def
}

// userNames lets the request logs name who asked (keystone is not metered).
func (w *world) userNames() {
	w.t.Helper()
	var rows []struct{ ID, Name string }
	if err := json.Unmarshal([]byte(w.osc("user", "list", "-f", "json")), &rows); err != nil {
		w.t.Fatalf("user list: %v", err)
	}
	for _, r := range rows {
		w.logs.users[r.ID] = r.Name
	}
}

// measure counts the requests nova-api and placement log during the next
// d, while the test itself sends none.
func (w *world) measure(what string, d time.Duration) (apiRate, []apiRequest) {
	w.t.Helper()
	from := w.logs.mark(w.t)
	select {
	case <-w.ctx.Done():
		w.t.Fatalf("%s: %v", what, w.ctx.Err())
	case <-time.After(d):
	}
	to := w.logs.mark(w.t)
	reqs := w.logs.between(w.t, from, to)
	r := rateOf(reqs, to.at.Sub(from.at))
	w.t.Logf("%s: %d requests in %s = %.1f/min (nova-api %.1f/min, placement %.1f/min)",
		what, len(reqs), r.window.Round(time.Second), r.total, r.byService["nova-api"], r.byService["placement"])
	return r, reqs
}

// watchKind is the region's maintenance watch: the one os-services
// listing without a host, every service_watch_interval, by one agent.
const watchKind = "nova-api GET /v2.1/os-services?binary=*"

// agentUser is the keystone user the agents log in as (cloud dvms-agent of
// devstack/functional/up.sh: role dvms only, issue 10); the tests
// themselves act as admin.
const agentUser = "dvms"

// agentsOf are the requests of the user the agents log in as (the test
// sends none as that user while it measures), and among them the watch's.
func agentsOf(reqs []apiRequest) (own, watch int) {
	for _, q := range reqs {
		if q.user == agentUser {
			own++
			if q.template() == watchKind {
				watch++
			}
		}
	}
	return own, watch
}

// settled waits until the agents have been at rest for settleQuiet: the
// maintenance watch runs and no other request of theirs since (their
// start-up reads, and the re-read of every host's service that the
// watch's first listing triggers, are not the cost at rest).
func (w *world) settled(since apiMark) {
	w.t.Helper()
	const settleQuiet = 10 * time.Second
	var last time.Time
	ok := w.eventuallyEvery("agents at rest (the watch runs, nothing else for 10 s)", 2*time.Minute, time.Second, func() bool {
		watching := false
		last = time.Time{}
		for _, q := range w.logs.between(w.t, since, w.logs.mark(w.t)) {
			switch {
			case q.user != agentUser:
			case q.template() == watchKind:
				watching = true
			default:
				last = q.at
			}
		}
		return watching && time.Since(last) >= settleQuiet
	})
	if !ok {
		w.t.Logf("agents never at rest for %s (last request other than the watch at %s): measuring anyway", settleQuiet, last.Format("15:04:05.000"))
	}
}

// quiet measures the agents of f at rest (servers booted, no event, no
// request from the test) against the baseline measured without agents.
//
// Two figures, both from nova-api's and placement's logs: idle minus
// baseline (the two windows' totals), and the agents' own requests in
// the idle window. The first also holds any traffic the agents make Nova
// itself send, but the cloud's own rounds (each nova-compute's resource
// tracker, ~7 requests a host every ~60 s, drifting under load) fall one
// more or one fewer time in a window depending on where its edges cut
// them: up to ~30 requests a minute either way on 8 hosts, close to the
// whole budget. So the budget holds the agents' own requests, and the
// cloud's own traffic during the idle window may exceed its baseline by at
// most one round per host (else the agents make Nova work).
func (w *world) quiet(f *fleet, started apiMark, baseline apiRate) {
	t := w.t
	if idleWindow < 2*time.Minute {
		t.Logf("note: idle window %s is shorter than the 2 minutes issue 9 asks for", idleWindow)
	}
	if baseline.byService["placement"] == 0 {
		// Every nova-compute's resource tracker talks to placement each
		// minute: nothing counted means the meter is broken, and a broken
		// meter would call any agent quiet.
		t.Fatalf("no placement request counted in the baseline: has the log format of %v changed?", w.logs.files)
	}
	w.settled(started)
	idle, reqs := w.measure(fmt.Sprintf("%d idle agents", len(f.procs)), idleWindow)
	logRates(t, baseline, idle)
	own, watch := agentsOf(reqs)
	perMin := func(n int) float64 { return float64(n) / idle.window.Minutes() }
	agents := float64(len(f.procs))
	t.Logf("AT REST: %d agents: %.1f requests/min above the baseline (%.1f idle - %.1f baseline); their own (user "+agentUser+") %.1f/min = "+
		"region's maintenance watch %.1f/min + %.2f per agent per minute; budget %.0f/min (%.0f per agent + %.0f region); "+
		"the cloud's own traffic %.1f/min while they idled (%.1f without them, at most %.1f)",
		len(f.procs), idle.total-baseline.total, idle.total, baseline.total, perMin(own),
		perMin(watch), perMin(own-watch)/agents, restPerAgent*agents+restRegion, restPerAgent, restRegion,
		idle.total-perMin(own), baseline.total, cloudLimit(baseline, idle))
	for _, p := range restProblems(baseline, idle, own, len(f.procs)) {
		t.Error(p)
	}
}

// cloudLimit: Nova's own traffic while the agents idle may exceed its
// baseline by one round per host in the idle window.
func cloudLimit(baseline, idle apiRate) float64 {
	return baseline.total * (1 + 1/idle.window.Minutes())
}

// restProblems are the at-rest checks the agents failed: own is the
// number of their requests in the idle window.
func restProblems(baseline, idle apiRate, own, agents int) []string {
	var out []string
	ownRate := float64(own) / idle.window.Minutes()
	budget := restPerAgent*float64(agents) + restRegion
	if ownRate > budget {
		out = append(out, fmt.Sprintf("idle agents sent %.1f nova-api + placement requests/min, more than %.0f (%.0f per agent + %.0f for the region): the noisiest kinds are listed first above",
			ownRate, budget, restPerAgent, restRegion))
	}
	if cloud := idle.total - ownRate; cloud > cloudLimit(baseline, idle) {
		out = append(out, fmt.Sprintf("with the agents idle, Nova's own services sent %.1f requests/min, more than %.1f (the baseline %.1f plus one round per host): the agents make Nova work",
			cloud, cloudLimit(baseline, idle), baseline.total))
	}
	return out
}

// TestFunctionalRestBudget needs no cloud: the at-rest checks on the
// rates the tier measured, and on the ones they must refuse.
func TestFunctionalRestBudget(t *testing.T) {
	rate := func(total float64, window time.Duration) apiRate { return apiRate{window: window, total: total} }
	base := rate(59, time.Minute)
	for _, tc := range []struct {
		name       string
		idle       float64 // requests/min in the 2-minute window
		own        int     // the agents' requests in it
		wantBudget bool
		wantCloud  bool
	}{
		{"local-first agents (measured: watch 30 + 1 per agent)", 97, 76, false, false},
		{"at the budget", 59 + 46, 92, false, false},
		{"one request a minute over", 59 + 47, 94, true, false},
		{"every second per agent (measured before local-first)", 1208.5, 2267, true, false},
		{"quiet agents that make Nova work", 59 + 38 + 30, 76, false, true},
		{"a round per host more than the baseline: edge noise", 59 + 38 + 29.5, 76, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := restProblems(base, rate(tc.idle, 2*time.Minute), tc.own, 8)
			budget := slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "idle agents sent") })
			cloud := slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "with the agents idle") })
			if budget != tc.wantBudget || cloud != tc.wantCloud || len(got) != btoi(budget)+btoi(cloud) {
				t.Errorf("problems %q, want budget %v cloud %v", got, tc.wantBudget, tc.wantCloud)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
