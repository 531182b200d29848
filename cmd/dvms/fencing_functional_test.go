//go:build functional

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/cutproxy"
)

// TestFunctionalFencedLeaderCut drains a host of 8 servers on the real
// Nova with one agent per compute host, each reaching NATS through a TCP
// proxy of its own, and cuts the executing leader's connection for 10 s
// once two moves are in Nova's hands (one running, one queued). The
// other agents declare it dead (consensus dead_after 3 s), the drained
// host's agent gives up on it. Checked from Nova's migration list and
// server events and from the agents' records:
//   - the cut leader hands Nova no new action of its plan past the grant
//     validity after the cut;
//   - at most one plan has migrations of the host in Nova at any moment;
//   - each migration off the host is recorded once (dvms events, all
//     agents joined) with its true outcome.
func TestFunctionalFencedLeaderCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	began := time.Now()
	w, bin := newWorld(t, ctx)
	fc, hosts := w.fc, w.hosts
	w.writeDemand(nil)
	const src = "compute-1"
	w.bootServers(map[string]int{src: 8})

	target := natsTarget(t, fc.dir)
	// Each agent reaches NATS through a proxy of its own.
	proxies := map[string]*cutproxy.Proxy{}
	for _, h := range hosts {
		p, err := cutproxy.New(target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[h] = p
	}
	f := startFleetEach(t, fc, bin, hosts, "fence", func(h string) []string { return []string{"DVMS_NATS_URL=nats://" + proxies[h].Addr()} }, w.fleetEnv()...)
	w.waitMembers(f)

	ids := slices.Clone(w.ids)
	disabledAt := time.Now()
	w.osc("compute", "service", "set", "--disable", "--disable-reason", "maintenance", src, "nova-compute")
	var first []acceptedBy
	if !w.eventuallyEvery("two moves off "+src+" in Nova's hands", 3*time.Minute, 200*time.Millisecond, func() bool {
		first = acceptedOff(f, src)
		return len(first) >= 2
	}) {
		t.Fatalf("no two migrations off %s accepted; agent logs in %s", src, f.logDir)
	}
	leader, lostEvent := first[0].agent, first[0].Event
	if leader == src {
		notRun(t, src+" leads its own drain: no leader to cut apart from the drained host")
	}
	proxies[leader].Cut()
	cutAt := time.Now()
	t.Logf("cut %s's NATS connection at %s (+%s after the disable), plan of event %s", leader, cutAt.Format("15:04:05.000"), cutAt.Sub(disabledAt).Round(time.Millisecond), lostEvent)
	select { // the scenario: a 10 s cut
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	proxies[leader].Heal()
	t.Logf("healed %s's NATS connection at +%s", leader, time.Since(cutAt).Round(time.Millisecond))
	if !w.eventually(src+" empty", 8*time.Minute, func() bool {
		ss, err := fc.cl.Servers(w.ctx, src)
		return err == nil && len(ss) == 0
	}) {
		t.Fatalf("%s not drained; agent logs in %s", src, f.logDir)
	}
	drained := time.Now()

	// (a) The cut leader sent nothing of its plan past the grant validity
	// (5 s) after the cut.
	for _, a := range acceptedOff(f, src) {
		if a.agent == leader && a.Event == lostEvent && a.at.After(cutAt.Add(5*time.Second)) {
			t.Errorf("cut leader %s handed Nova %s at +%s after the cut, past the grant validity", leader, a.Server, a.at.Sub(cutAt).Round(time.Millisecond))
		}
	}

	// Nova's own records: each migration off src, paired with the
	// live-migration action (request id) of its server in order of time,
	// and that request id with the agent and event that sent it.
	rows := slices.DeleteFunc(w.migrationsFrom(src), func(r migrationRow) bool {
		c, err := novaTime(r.CreatedAt)
		return r.Source != src || r.Type != "live-migration" || err != nil || c.Before(disabledAt.Add(-time.Minute)) || !slices.Contains(ids, r.Server)
	})
	byReq := map[string]acceptedBy{}
	for _, a := range acceptedOff(f, src) {
		byReq[a.NovaRequestID] = a
	}
	type span struct {
		plan, server, status string
		from, to             time.Time
	}
	var spans []span
	completed := map[string]int{}
	for _, id := range ids {
		var mine []migrationRow
		for _, r := range rows {
			if r.Server == id {
				mine = append(mine, r)
			}
		}
		slices.SortFunc(mine, func(a, b migrationRow) int { return strings.Compare(a.CreatedAt, b.CreatedAt) })
		reqs := liveMigrationRequests(t, w, id, disabledAt)
		if len(reqs) != len(mine) {
			t.Errorf("server %s: %d live migrations off %s in Nova's list, %d live-migration actions in its event list", id, len(mine), src, len(reqs))
		}
		for i, r := range mine {
			from, _ := novaTime(r.CreatedAt)
			to, _ := novaTime(r.UpdatedAt)
			plan := "unknown"
			if i < len(reqs) {
				if a, ok := byReq[reqs[i]]; ok {
					plan = a.agent + "/" + a.Event
				}
			}
			spans = append(spans, span{plan: plan, server: id, status: r.Status, from: from, to: to})
			if r.Status == "completed" {
				completed[id]++
			}
			t.Logf("migration %d %s -> %s %s %s..%s plan %s", r.ID, id, r.Dest, r.Status, from.Format("15:04:05"), to.Format("15:04:05"), plan)
		}
	}
	// At most one plan acting on src at any moment (Nova's times are whole
	// seconds: a second's tolerance).
	plans := map[string]bool{}
	for _, a := range spans {
		plans[a.plan] = true
		for _, b := range spans {
			if a.plan != b.plan && b.from.After(a.from) && b.from.Before(a.to.Add(-time.Second)) {
				t.Errorf("plan %s's migration of %s began at %s while plan %s's of %s ran (until %s)",
					b.plan, b.server, b.from.Format("15:04:05"), a.plan, a.server, a.to.Format("15:04:05"))
			}
		}
	}

	// Each migration recorded once, with its true outcome: dvms events
	// joins every agent's journal.
	dvms := func(args ...string) []byte {
		cmd := exec.CommandContext(w.ctx, bin, args...)
		cmd.Env = fc.env("DVMS_NATS_URL=nats://" + target) // the cloud's NATS, wherever up.sh put it
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dvms %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	var problems []string
	check := func() bool {
		problems = nil
		var evs []struct {
			Event, Kind, Host, Outcome, Reason string
			Actions                            []map[string]string
		}
		if out := dvms("events", "-f", "json", "--host", src); json.Unmarshal(out, &evs) != nil {
			t.Fatalf("events json:\n%s", out)
		}
		done := map[string]int{}
		for _, e := range evs {
			for _, a := range e.Actions {
				if a["action"] == "live-migrate" && a["from"] == src && a["outcome"] == "done" && slices.Contains(ids, a["server"]) {
					done[a["server"]]++
				}
			}
		}
		for _, id := range ids {
			if done[id] != completed[id] {
				problems = append(problems, fmt.Sprintf("%s: %d live migration(s) completed in Nova, %d recorded done", id, completed[id], done[id]))
			}
		}
		return len(problems) == 0
	}
	if !w.eventually("each migration recorded once as it ended", time.Minute, check) {
		for _, p := range problems {
			t.Error(p)
		}
	}
	// What adopting cost Nova (the agent counts its requests).
	adopted := 0
	for h, p := range f.logs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "adopted the lost leader's moves: recorded as they ended in Nova" {
				adopted++
				t.Logf("ADOPTION by %s: event %v: %v done, %v failed, %v never sent; %v Nova requests while held %v ms",
					h, m["event"], m["done"], m["failed"], m["not_sent"], m["nova_requests"], m["held"])
			}
		}
	}
	t.Logf("FENCE: %s drained (%d servers) in %s after the disable, %s's NATS cut 10 s mid-drain; %d migrations by %d plan(s), never two plans at once; %d adoption(s); test took %s",
		src, len(ids), drained.Sub(disabledAt).Round(time.Second), leader, len(spans), len(plans), adopted, time.Since(began).Round(time.Second))
}

// acceptedBy is an "action accepted by nova" record of one agent.
type acceptedBy struct {
	logLine
	agent string
	at    time.Time
}

// acceptedOff lists the actions off host the agents handed Nova, in the
// order they were accepted.
func acceptedOff(f *fleet, host string) []acceptedBy {
	var out []acceptedBy
	for h, p := range f.logs {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				logLine
				Time time.Time `json:"time"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "action accepted by nova" && l.From == host {
				out = append(out, acceptedBy{logLine: l.logLine, agent: h, at: l.Time})
			}
		}
		fh.Close()
	}
	slices.SortFunc(out, func(a, b acceptedBy) int { return a.at.Compare(b.at) })
	return out
}

// liveMigrationRequests lists the request ids of server id's
// live-migration actions since since, oldest first.
func liveMigrationRequests(t *testing.T, w *world, id string, since time.Time) []string {
	t.Helper()
	var evs []struct {
		RequestID string `json:"Request ID"`
		Action    string `json:"Action"`
		Start     string `json:"Start Time"`
	}
	if err := json.Unmarshal([]byte(w.osc("server", "event", "list", id, "-f", "json")), &evs); err != nil {
		t.Fatalf("event list %s: %v", id, err)
	}
	slices.SortFunc(evs, func(a, b struct {
		RequestID string `json:"Request ID"`
		Action    string `json:"Action"`
		Start     string `json:"Start Time"`
	}) int {
		return strings.Compare(a.Start, b.Start)
	})
	var out []string
	for _, e := range evs {
		if st, err := novaTime(e.Start); e.Action == "live-migration" && err == nil && !st.Before(since.Add(-time.Minute)) {
			out = append(out, e.RequestID)
		}
	}
	return out
}

// natsTarget is the host:port of the cloud's NATS server (its dvms.conf).
func natsTarget(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "etc", "dvms.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "url" && strings.HasPrefix(strings.TrimSpace(v), "nats://") {
			u, err := url.Parse(strings.Fields(strings.Split(strings.TrimSpace(v), ",")[0])[0])
			if err != nil {
				t.Fatal(err)
			}
			return u.Host
		}
	}
	t.Fatal("no [nats] url in the cloud's dvms.conf")
	return ""
}
