package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/status"
)

// dvms status: an agent others hear but that did not answer is listed;
// a partition appears once, as its leader sees it; the arbiter's views
// are grouped.
func TestStatusTables(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Maintenance, Host: "c1", Detected: now.Add(-30 * time.Second)}
	stale := status.PartitionOf(&scheduler.Partition{ID: "p1", Initiator: "c1", Leader: "c2", Nodes: []string{"c1"}, State: scheduler.Growing, Events: []scheduler.Event{ev}})
	fresh := status.PartitionOf(&scheduler.Partition{ID: "p1", Initiator: "c1", Leader: "c2", Nodes: []string{"c1", "c2"}, State: scheduler.Blocked, Events: []scheduler.Event{ev}})
	raft := func(leader string, term uint64) *status.ArbiterInfo {
		return &status.ArbiterInfo{Kind: "raft", Voter: true, Leader: leader, Voters: []string{"c1", "c2", "c3"}, Term: term}
	}
	night, err := scheduler.ParseWindows("underload=22:00-06:00 UTC")
	if err != nil {
		t.Fatal(err)
	}
	members := []status.MemberInfo{{Host: "c1"}, {Host: "c2"}, {Host: "c3", Version: "v9", LastHeard: now.Add(-3 * time.Second)}}
	reps := []status.Report{
		{Host: "c1", State: "member", Now: now, Partition: stale, Members: members, Arbiter: raft("c2", 7),
			Control: control.View{Paused: true, Mode: "advise", HostModes: map[string]string{"c3": "enforce"}, Excluded: []string{"c2"}, Latest: now.Add(-time.Minute)},
			Demand:  &status.DemandInfo{Source: "cgroup", Coverage: cgroup.Coverage{Listed: 4, Blind: true}}, Windows: status.WindowsOf(night, now), Oscillations: 2},
		{Host: "c2", State: "leader", Now: now, Partition: fresh, Members: members, Arbiter: raft("c2", 8), Excluded: true,
			Demand: &status.DemandInfo{Source: "cgroup", Coverage: cgroup.Coverage{Listed: 3, Measured: 2}}},
	}
	ts := statusTables(reps, now)
	var b bytes.Buffer
	if err := writeTables(&b, "value", nil, ts...); err != nil {
		t.Fatal(err)
	}
	want := "c1  member p1  0s ago false false false cgroup BLIND 0/4 underload closed until Thu 22:00Z 2\n" +
		"c2  leader p1  0s ago false false true cgroup 2/3  0\n" +
		"c3  no answer  v9 3s ago false false false   \n" +
		"true advise c3=enforce c2 2026-01-01T11:59:00Z c1\n" +
		"false advise_only of each agent    c2\n" +
		"p1 c1 c2 c1 c2 blocked e1 maintenance 30s\n" +
		"raft c2 8 c1 c2 c3 c1 c2\n"
	if b.String() != want {
		t.Errorf("status:\n got %q\nwant %q", b.String(), want)
	}
}

// The records of one event kept by the agent that raised it and by the
// one that planned it join into one event with its actions.
func TestJournalJoinsAgents(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	raiser, leader := journal.New("c1", clock), journal.New("c2", clock)
	ev := scheduler.Event{ID: "c1-1", Kind: scheduler.Overload, Host: "c1", Detected: now}
	raiser.Record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev, Partition: "p1", Size: 1})
	raiser.Record(scheduler.Record{Kind: scheduler.RecBlocked, Partition: "p1", Size: 2})
	now = now.Add(time.Second)
	leader.Record(scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Partition: "p1", Size: 2, Moves: 1})
	leader.Exec(ev, node.ExecResult{Actions: []node.ActionResult{{
		Action:  scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "c1", To: "c2"},
		Outcome: node.ActionDone, Receipt: nova.Receipt{GlobalRequestID: node.RequestID(ev.ID), LocalRequestID: "req-n"},
	}}})
	now = now.Add(time.Second)
	raiser.Record(scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Partition: "p1", Size: 2, Outcome: scheduler.Solved, Reason: "1 done"})
	es := status.Events([]status.Report{{Events: raiser.Snapshot()}, {Events: leader.Snapshot()}})
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
	if got := journal.Touching(es, "c2"); len(got) != 1 {
		t.Errorf("--host c2 (the destination) drops the event")
	}
	if got := journal.Touching(es, "c3"); len(got) != 0 {
		t.Errorf("--host c3 keeps an event of c1 to c2")
	}
	if got := journal.Filter(raiser.Snapshot(), now.Add(time.Second), 0); len(got) != 0 {
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
	held := journal.Action{Kind: "live-migrate", Server: "s1", From: "c1", To: "c2", Outcome: "skipped", Class: "advise", Reason: "advise mode: not executed"}
	disabled := journal.Action{Kind: "live-migrate", Server: "s2", From: "c1", To: "c3", Outcome: "skipped", Class: "destination_disabled", Reason: "destination is disabled/up"}
	elsewhere := held
	elsewhere.To = "c5"
	nowHolds := disabled
	nowHolds.Class, nowHolds.Reason = "advise", "advise mode: not executed"
	es := []journal.Entry{
		{ID: "e1", Kind: "overload", Host: "c1", Planned: at(0), Leader: "c2", PlanReason: "fixes c1", Actions: []journal.Action{held, disabled}},
		{ID: "e2", Kind: "overload", Host: "c4", Planned: at(1), Actions: []journal.Action{
			{Kind: "live-migrate", Server: "s9", From: "c4", To: "c5", Outcome: "done"},
		}},
		{ID: "e3", Kind: "overload", Host: "c1", Planned: at(5), Leader: "c3", PlanReason: "fixes c1", Actions: []journal.Action{disabled, held}},
		{ID: "e4", Kind: "overload", Host: "c1", Planned: at(15), Leader: "c2", PlanReason: "fixes c1", Actions: []journal.Action{elsewhere, disabled}},
		{ID: "e5", Kind: "overload", Host: "c1", Planned: at(35), Leader: "c2", PlanReason: "fixes c1", Actions: []journal.Action{held, nowHolds}},
		{ID: "e6", Kind: "overload", Host: "c1", Planned: at(40), Leader: "c2", PlanReason: "fixes c1", Actions: []journal.Action{held, disabled}},
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
