package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// dvms status: an agent others hear but that did not answer is listed;
// a partition appears once, as its leader sees it; the arbiter's views
// are grouped.
func TestStatusTables(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Maintenance, Host: "c1", Detected: now.Add(-30 * time.Second)}
	stale := partInfo(&scheduler.Partition{ID: "p1", Initiator: "c1", Leader: "c2", Nodes: []string{"c1"}, State: scheduler.Growing, Events: []scheduler.Event{ev}})
	fresh := partInfo(&scheduler.Partition{ID: "p1", Initiator: "c1", Leader: "c2", Nodes: []string{"c1", "c2"}, State: scheduler.Blocked, Events: []scheduler.Event{ev}})
	raft := func(leader string, term uint64) *arbiterInfo {
		return &arbiterInfo{Kind: "raft", Voter: true, Leader: leader, Voters: []string{"c1", "c2", "c3"}, Term: term}
	}
	members := []memberInfo{{Host: "c1"}, {Host: "c2"}, {Host: "c3", Version: "v9", LastHeard: now.Add(-3 * time.Second)}}
	reps := []agentReport{
		{Host: "c1", State: "member", Now: now, Partition: stale, Members: members, Arbiter: raft("c2", 7),
			Control: controlView{Paused: true, Mode: "advise", HostModes: map[string]string{"c3": "enforce"}, Excluded: []string{"c2"}, Latest: now.Add(-time.Minute)},
			Demand:  &demandInfo{Source: "cgroup", Coverage: cgroup.Coverage{Listed: 4, Blind: true}}},
		{Host: "c2", State: "leader", Now: now, Partition: fresh, Members: members, Arbiter: raft("c2", 8), Excluded: true,
			Demand: &demandInfo{Source: "cgroup", Coverage: cgroup.Coverage{Listed: 3, Measured: 2}}},
	}
	ts := statusTables(reps, now)
	var b bytes.Buffer
	if err := writeTables(&b, "value", nil, ts...); err != nil {
		t.Fatal(err)
	}
	want := "c1  member p1  0s ago false false false cgroup BLIND 0/4\n" +
		"c2  leader p1  0s ago false false true cgroup 2/3\n" +
		"c3  no answer  v9 3s ago false false false \n" +
		"true advise c3=enforce c2 2026-01-01T11:59:00Z c1\n" +
		"false advise_only of each agent    c2\n" +
		"p1 c1 c2 c1 c2 blocked e1 maintenance 30s\n" +
		"raft c2 8 c1 c2 c3 c1 c2\n"
	if b.String() != want {
		t.Errorf("status:\n got %q\nwant %q", b.String(), want)
	}
}

// Every family the agent registers is in metricNames, and only those:
// the dashboard test trusts that list.
func TestMetricNamesAreWhatTheAgentRegisters(t *testing.T) {
	meter := nova.NewMeter()
	meter.Record(nova.Request{Template: nova.Template{Service: nova.ServiceCompute, Method: "GET", Path: "/servers/detail"}, Latency: time.Millisecond, Class: nova.ClassOK})
	m := newAgentMetrics(metricsSources{host: "h1", meter: meter,
		dropped: func() int64 { return 0 }, members: func() int { return 1 }, watch: func() bool { return true },
		partition: func() *scheduler.Partition { return nil }, arbiter: func() *arbiterInfo { return nil },
		advise: func() bool { return false }, paused: func() bool { return false }, excluded: func() bool { return false },
		coverage: func() (cgroup.Coverage, bool) { return cgroup.Coverage{}, true }})
	now := time.Now()
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Overload, Host: "h1", Detected: now.Add(-time.Second)}
	h := observeHooks(m, nil, func() time.Time { return now })
	for _, k := range []scheduler.RecordKind{scheduler.RecEventRaised, scheduler.RecPlanned, scheduler.RecEventEnded, scheduler.RecMergeCommitted, scheduler.RecDropped} {
		h.OnRecord("h1", scheduler.Record{Kind: k, Event: ev, Outcome: scheduler.Solved, Size: 2})
	}
	h.OnSend("h1", scheduler.Message{Type: scheduler.MsgGrow})
	h.OnExec("h1", ev, node.ExecResult{Actions: []node.ActionResult{{Action: scheduler.Action{Kind: scheduler.LiveMigrate}, Outcome: node.ActionDone}}})
	h.OnSolve("h1", scheduler.SolveRequest{}, scheduler.Solution{}, time.Millisecond)
	h.OnCompletion("h1", node.CompleteAbort, node.CompletionAccepted)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
	}
	want := slices.Sorted(slices.Values(metricNames))
	if !slices.Equal(got, want) {
		t.Fatalf("registered families:\n %v\nmetricNames:\n %v", got, want)
	}
}

// The Grafana dashboard is well formed and every query names metrics the
// agents export.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("../../etc/grafana/dvms.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos *struct {
				X, Y, W, H int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	known := map[string]bool{}
	for _, n := range metricNames {
		known[n] = true
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			known[n+s] = true // histogram series
		}
	}
	name := regexp.MustCompile(`\bdvms_[a-z0-9_]+`)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 || p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d %q: needs a unique id, a type, a title and a grid position", p.ID, p.Title)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			used := name.FindAllString(q.Expr, -1)
			if len(used) == 0 || q.RefID == "" {
				t.Errorf("panel %q: query %q names no dvms metric (or has no refId)", p.Title, q.Expr)
			}
			for _, u := range used {
				if !known[u] {
					t.Errorf("panel %q: %s is not a metric the agents export", p.Title, u)
				}
			}
		}
	}
}

// The metrics' reason label is the class the executor set where it
// decided, not a reading of the reason's words.
func TestReasonClass(t *testing.T) {
	for _, c := range []struct {
		r    node.ActionResult
		want string
	}{
		{node.ActionResult{Outcome: node.ActionDone, Class: node.ReasonNone}, "none"},
		{node.ActionResult{Outcome: node.ActionSkipped, Class: node.ReasonDestinationDisabled, Reason: "anything at all"}, "destination_disabled"},
		{node.ActionResult{Outcome: node.ActionSkipped, Class: node.ReasonPaused, Reason: "destination is disabled/up"}, "paused"},
		{node.ActionResult{Outcome: node.ActionFailed, Reason: "destination is disabled/up"}, "other"},
	} {
		if got := reasonClass(c.r); got != c.want {
			t.Errorf("reasonClass(%+v) = %s, want %s", c.r, got, c.want)
		}
	}
}

// The records of one event kept by the agent that raised it and by the
// one that planned it join into one event with its actions.
func TestJournalJoinsAgents(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	raiser, leader := newJournal("c1", clock), newJournal("c2", clock)
	ev := scheduler.Event{ID: "c1-1", Kind: scheduler.Overload, Host: "c1", Detected: now}
	raiser.record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev, Partition: "p1", Size: 1})
	raiser.record(scheduler.Record{Kind: scheduler.RecBlocked, Partition: "p1", Size: 2})
	now = now.Add(time.Second)
	leader.record(scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Partition: "p1", Size: 2, Moves: 1})
	leader.exec(ev, node.ExecResult{Actions: []node.ActionResult{{
		Action:  scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "c1", To: "c2"},
		Outcome: node.ActionDone, Receipt: nova.Receipt{GlobalRequestID: node.RequestID(ev.ID), LocalRequestID: "req-n"},
	}}})
	now = now.Add(time.Second)
	raiser.record(scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Partition: "p1", Size: 2, Outcome: scheduler.Solved, Reason: "1 done"})
	es := joinEvents([]agentReport{{Events: raiser.snapshot()}, {Events: leader.snapshot()}})
	if len(es) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(es), es)
	}
	e := es[0]
	if e.Planned == nil || e.Ended == nil || e.Outcome != "solved" || e.Leader != "c2" || e.Moves != 1 || e.Size != 2 || len(e.Actions) != 1 || e.Actions[0].NovaReqID != "req-n" {
		t.Errorf("joined event: %+v", e)
	}
	var steps []string
	for _, s := range e.Steps {
		steps = append(steps, s.Agent+" "+s.Record)
	}
	if want := []string{"c1 event-raised", "c1 blocked", "c2 planned", "c1 event-ended"}; !slices.Equal(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}
	if got := filterHost(es, "c2"); len(got) != 1 {
		t.Errorf("--host c2 (the destination) drops the event")
	}
	if got := filterHost(es, "c3"); len(got) != 0 {
		t.Errorf("--host c3 keeps an event of c1 to c2")
	}
	if got := filterEvents(raiser.snapshot(), now.Add(time.Second), 0); len(got) != 0 {
		t.Errorf("--since after the last change keeps %d events", len(got))
	}
}

// dvms plans lists the advised plans only, each move with its re-check;
// a plan advised again (the agent raised its event again after the
// backoff and planned the same moves) is one row, the latest event's, with
// how many times and since when; one that differs in a destination or a
// re-check is a row of its own.
func TestPlansTable(t *testing.T) {
	at := func(s int) *time.Time { p := time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC); return &p }
	held := actionEntry{Kind: "live-migrate", Server: "s1", From: "c1", To: "c2", Outcome: "skipped", Class: "advise", Reason: "advise mode: not executed"}
	disabled := actionEntry{Kind: "live-migrate", Server: "s2", From: "c1", To: "c3", Outcome: "skipped", Class: "destination_disabled", Reason: "destination is disabled/up"}
	elsewhere := held
	elsewhere.To = "c5"
	nowHolds := disabled
	nowHolds.Class, nowHolds.Reason = "advise", "advise mode: not executed"
	es := []eventEntry{
		{ID: "e1", Kind: "overload", Host: "c1", Planned: at(0), Leader: "c2", PlanReason: "fixes c1", Actions: []actionEntry{held, disabled}},
		{ID: "e2", Kind: "overload", Host: "c4", Planned: at(1), Actions: []actionEntry{
			{Kind: "live-migrate", Server: "s9", From: "c4", To: "c5", Outcome: "done"},
		}},
		{ID: "e3", Kind: "overload", Host: "c1", Planned: at(5), Leader: "c3", PlanReason: "fixes c1", Actions: []actionEntry{disabled, held}},
		{ID: "e4", Kind: "overload", Host: "c1", Planned: at(15), Leader: "c2", PlanReason: "fixes c1", Actions: []actionEntry{elsewhere, disabled}},
		{ID: "e5", Kind: "overload", Host: "c1", Planned: at(35), Leader: "c2", PlanReason: "fixes c1", Actions: []actionEntry{held, nowHolds}},
		{ID: "e6", Kind: "overload", Host: "c1", Planned: at(40), Leader: "c2", PlanReason: "fixes c1", Actions: []actionEntry{held, disabled}},
	}
	var b bytes.Buffer
	if err := writeTables(&b, "value", nil, plansTable(es)); err != nil {
		t.Fatal(err)
	}
	want := "e6 overload c1 2026-01-01T00:00:40Z c2 fixes c1 live-migrate s1 c1 -> c2 holds live-migrate s2 c1 -> c3 would be skipped: destination is disabled/up 3 2026-01-01T00:00:00Z\n" +
		"e4 overload c1 2026-01-01T00:00:15Z c2 fixes c1 live-migrate s1 c1 -> c5 holds live-migrate s2 c1 -> c3 would be skipped: destination is disabled/up 1 2026-01-01T00:00:15Z\n" +
		"e5 overload c1 2026-01-01T00:00:35Z c2 fixes c1 live-migrate s1 c1 -> c2 holds live-migrate s2 c1 -> c3 holds 1 2026-01-01T00:00:35Z\n"
	if b.String() != want {
		t.Errorf("plans:\n got %q\nwant %q", b.String(), want)
	}
}

// The journal keeps the last journalEvents events.
func TestJournalIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := newJournal("c1", func() time.Time { return now })
	for i := range journalEvents + 5 {
		now = now.Add(time.Second)
		j.record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: scheduler.Event{ID: fmt.Sprint("e", i), Detected: now}, Partition: fmt.Sprint("p", i)})
	}
	es := j.snapshot()
	if len(es) != journalEvents || es[0].ID != "e5" || len(j.parts) != journalEvents {
		t.Fatalf("%d events from %s, %d partitions; want %d from e5", len(es), es[0].ID, len(j.parts), journalEvents)
	}
}

// An answer too big for one NATS message drops its oldest events.
func TestEncodeReportFits(t *testing.T) {
	rep := agentReport{V: 1, Host: "c1"}
	for i := range 300 {
		rep.Events = append(rep.Events, eventEntry{ID: fmt.Sprint("e", i), Reason: strings.Repeat("x", 4096)})
	}
	data := encodeReport(rep)
	var got agentReport
	if err := json.Unmarshal(data, &got); err != nil || len(data) > maxReport || got.Truncated == 0 || got.Events[len(got.Events)-1].ID != "e299" {
		t.Fatalf("%d bytes, truncated %d, err %v", len(data), got.Truncated, err)
	}
}

// The CLI stops waiting once every member any answer lists has answered,
// and waits for the timeout when one is missing.
func TestGatherReports(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(name string) *bus.NATS {
		bc := bus.DefaultConfig()
		bc.URL, bc.Name = ns.ClientURL(), name
		tr, err := bus.ConnectNATS(ctx, bc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	var mu sync.Mutex
	members := []memberInfo{{Host: "c1"}, {Host: "c2"}}
	for _, h := range []string{"c1", "c2"} {
		tr := connect(h)
		s := &statusService{region: "g", tr: tr, report: func(statusRequest) agentReport {
			mu.Lock()
			defer mu.Unlock()
			return agentReport{V: 1, Host: h, Members: slices.Clone(members)}
		}}
		go func() { _ = s.run(ctx) }()
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := tr.Flush(fctx); err != nil {
			t.Fatal(err)
		}
		fcancel()
	}
	cli := connect("cli")
	// The services subscribe asynchronously: ask until both answered.
	var reps []agentReport
	start := time.Now()
	for len(reps) < 2 && time.Since(start) < 10*time.Second {
		reps, _ = gatherReports(ctx, cli, gatherConfig{Region: "g", Timeout: 500 * time.Millisecond})
	}
	if len(reps) != 2 || reps[0].Host != "c1" || reps[1].Host != "c2" {
		t.Fatalf("reports %+v", reps)
	}
	start = time.Now()
	reps, err = gatherReports(ctx, cli, gatherConfig{Region: "g", Timeout: time.Minute})
	if err != nil || len(reps) != 2 || time.Since(start) > 30*time.Second {
		t.Fatalf("all members answered, yet waited %s: %v %v", time.Since(start), reps, err)
	}
	mu.Lock()
	members = append(members, memberInfo{Host: "c3"}) // heard, silent
	mu.Unlock()
	start = time.Now()
	reps, err = gatherReports(ctx, cli, gatherConfig{Region: "g", Timeout: 300 * time.Millisecond})
	if err != nil || len(reps) != 2 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("c3 silent: %v %v after %s", reps, err, time.Since(start))
	}
	if _, err := gatherReports(ctx, cli, gatherConfig{Region: "nobody", Timeout: 100 * time.Millisecond}); err == nil {
		t.Fatal("no agent answered, no error")
	}
}

// Command-line conventions: --version, usage errors exit 2 with the usage,
// drain without HOST never asks for a cloud.
func TestCLIConventions(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"dvms", "--version"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), version) {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
	for _, cmd := range []string{"drain", "undrain"} {
		out.Reset()
		errOut.Reset()
		code := run([]string{"dvms", cmd}, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "usage: dvms "+cmd) || strings.Contains(errOut.String(), "os-cloud") {
			t.Errorf("dvms %s without HOST: exit %d, stderr %q", cmd, code, errOut.String())
		}
	}
	errOut.Reset()
	if code := run([]string{"dvms", "status", "--no-such-flag"}, &out, &errOut); code != exitUsage {
		t.Errorf("unknown flag: exit %d, %q", code, errOut.String())
	}
	if code := run([]string{"dvms", "events", "-f", "xml"}, &out, &errOut); code != exitUsage {
		t.Errorf("-f xml: exit %d, %q", code, errOut.String())
	}
	if code := run([]string{"dvms", "events", "--since", "yesterday"}, &out, &errOut); code != exitUsage {
		t.Errorf("--since yesterday: exit %d, %q", code, errOut.String())
	}
	// A command that fails (no NATS there) exits 1.
	if code := run([]string{"dvms", "status", "--nats-url", "nats://127.0.0.1:1", "--timeout", "100ms"}, &out, &errOut); code != exitFailed {
		t.Errorf("status without NATS: exit %d, %q", code, errOut.String())
	}
}

// The agent speaks systemd's notify protocol on $NOTIFY_SOCKET: READY,
// and WATCHDOG only while the runner is alive; nothing off systemd.
func TestSdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := dir + "/notify"
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := func(d time.Duration) (string, bool) {
		buf := make([]byte, 256)
		_ = ln.SetReadDeadline(time.Now().Add(d))
		n, err := ln.Read(buf)
		return string(buf[:n]), err == nil
	}
	if n := newNotifier(fakeEnv(), 1); n.send("READY=1") != nil || n.addr != "" || n.watchdog != 0 {
		t.Fatalf("off systemd: %+v", n)
	}
	if n := newNotifier(fakeEnv("NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=20000", "WATCHDOG_PID=2"), 1); n.watchdog != 0 {
		t.Fatalf("a watchdog meant for pid 2 taken by pid 1: %+v", n)
	}
	n := newNotifier(fakeEnv("NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=20000", "WATCHDOG_PID=1"), 1)
	if n.watchdog != 10*time.Millisecond {
		t.Fatalf("watchdog every %s, want half of 20 ms", n.watchdog)
	}
	if err := n.send("READY=1"); err != nil {
		t.Fatal(err)
	}
	if got, ok := read(10 * time.Second); !ok || got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	var alive atomic.Bool
	alive.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.watch(ctx, alive.Load) }()
	for range 3 {
		if got, ok := read(10 * time.Second); !ok || got != "WATCHDOG=1" {
			t.Fatalf("got %q, want WATCHDOG=1", got)
		}
	}
	alive.Store(false)
	// Drain a keep-alive decided before the store (at most one is in
	// flight), then expect silence for 20 periods.
	for range 3 {
		if _, ok := read(200 * time.Millisecond); !ok {
			break
		}
	}
	if got, ok := read(200 * time.Millisecond); ok {
		t.Fatalf("runner stopped, yet %q", got)
	}
	cancel()
	<-done
}
