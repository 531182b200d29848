package journal

import (
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// The journal keeps the last MaxEvents events.
func TestJournalIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := New("c1", func() time.Time { return now })
	for i := range MaxEvents + 5 {
		now = now.Add(time.Second)
		j.Record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: scheduler.Event{ID: fmt.Sprint("e", i), Detected: now}, Partition: fmt.Sprint("p", i)})
	}
	es := j.Snapshot()
	if len(es) != MaxEvents || es[0].ID != "e5" || len(j.parts) != MaxEvents {
		t.Fatalf("%d events from %s, %d partitions; want %d from e5", len(es), es[0].ID, len(j.parts), MaxEvents)
	}
}

// A granted move recorded by its leader and by its source's agent (which
// followed it in Nova after giving up on the leader) is joined into one
// record: the one that knows how it ended. Records without a grant, and
// "local" grants, are all kept.
func TestJoinKeepsOneRecordPerGrant(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Maintenance, Host: "h1", Detected: now}
	mv := func(server string) scheduler.Action {
		return scheduler.Action{Kind: scheduler.LiveMigrate, Server: server, From: "h1", To: "h2"}
	}
	leader, src := New("h2", func() time.Time { return now }), New("h1", func() time.Time { return now.Add(time.Minute) })
	leader.Exec(ev, node.ExecResult{Actions: []node.ActionResult{
		{Action: mv("s1"), Outcome: node.ActionDone, Class: node.ReasonNone, Grant: "h2-1"},
		{Action: mv("s2"), Outcome: node.ActionFailed, Class: node.ReasonTimeout, Reason: "outcome unknown", Grant: "h2-2"},
		{Action: mv("s3"), Outcome: node.ActionSkipped, Class: node.ReasonFenced, Reason: "fenced"},
		{Action: mv("s4"), Outcome: node.ActionDone, Class: node.ReasonNone, Grant: "local"},
	}})
	src.Adopted(ev, node.ExecResult{Done: 2, Actions: []node.ActionResult{
		{Action: mv("s1"), Outcome: node.ActionDone, Class: node.ReasonNone, Grant: "h2-1"},
		{Action: mv("s2"), Outcome: node.ActionDone, Class: node.ReasonNone, Grant: "h2-2"},
	}})
	es := Join(leader.Snapshot(), src.Snapshot())
	if len(es) != 1 {
		t.Fatalf("%d events, want 1", len(es))
	}
	var got []string
	for _, a := range es[0].Actions {
		got = append(got, fmt.Sprintf("%s %s adopted=%v", a.Server, a.Outcome, a.Adopted))
	}
	want := []string{"s1 done adopted=false", "s3 skipped adopted=false", "s4 done adopted=false", "s2 done adopted=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("joined actions %v, want %v", got, want)
	}
	if !slicesContainsStep(es[0].Steps, RecAdopted) {
		t.Errorf("no %q step: %+v", RecAdopted, es[0].Steps)
	}
}

func slicesContainsStep(ss []Step, record string) bool {
	for _, s := range ss {
		if s.Record == record {
			return true
		}
	}
	return false
}
