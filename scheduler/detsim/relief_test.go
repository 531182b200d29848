package detsim

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// A partition relieving an overload grows past its ring successor, where
// the server only fits, to a host with room (Config.ReliefHeadroom); with
// relief headroom off it stops at the successor.
func TestReliefGrowsPastATightHost(t *testing.T) {
	for _, tc := range []struct {
		headroom float64
		want     string
		size     int
	}{{0.4, "h3", 3}, {0, "h2", 2}} {
		ac := scheduler.DefaultConfig("template")
		ac.ReliefHeadroom = tc.headroom
		c := New(Options{Seed: 1, Agent: ac}, []scheduler.Host{
			host("h1", 8, server("a", 4), server("b", 3), server("c", 2)), // 9 of 8 cores
			host("h2", 8, server("t", 5.5)),                               // c fits: 7.5 of 8
			host("h3", 8, server("u", 1)),
		})
		if !c.RunUntil(30*time.Second, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
			t.Fatalf("headroom %v: still overloaded: %v", tc.headroom, c.Overloaded())
		}
		if len(c.Violations) > 0 {
			t.Fatalf("headroom %v: violations: %v", tc.headroom, c.Violations)
		}
		if len(c.Moves) != 1 || c.Moves[0].To != tc.want {
			t.Fatalf("headroom %v: moves %+v, want one to %s", tc.headroom, c.Moves, tc.want)
		}
		for _, r := range c.Records {
			if r.Record.Kind == scheduler.RecEventEnded && r.Record.Size != tc.size {
				t.Fatalf("headroom %v: partition of %d hosts, want %d", tc.headroom, r.Record.Size, tc.size)
			}
		}
	}
}

// One lost snapshot does not end an event: the leader asks the members
// it has not heard from again, halfway to SnapshotTimeout.
func TestLostSnapshotAskedAgain(t *testing.T) {
	c := New(Options{Seed: 1}, []scheduler.Host{
		host("h1", 4, server("a", 2), server("b", 2), server("c", 1)),
		host("h2", 4, server("d", 1)),
		host("h3", 4),
	})
	dropped := 0
	c.Filter = func(from, to string, m scheduler.Message) bool {
		if m.Type == scheduler.MsgSnapshot && from == "h1" && dropped == 0 {
			dropped++
			return false // the initiator's first snapshot to its new leader
		}
		return true
	}
	if !c.RunUntil(30*time.Second, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
		t.Fatalf("overload not solved: %v", c.Overloaded())
	}
	if dropped != 1 {
		t.Fatalf("dropped %d snapshots, want 1 (the test's premise)", dropped)
	}
	if n := c.Count(scheduler.RecEventEnded, scheduler.Aborted); n != 0 {
		t.Fatalf("%d events aborted, want 0: the snapshot is asked for again", n)
	}
	if got := c.Count(scheduler.RecEventEnded, scheduler.Solved); got != 1 {
		t.Fatalf("solved events = %d, want 1", got)
	}
}

// As its plan starts, a partition releases the members the plan does not
// touch: they are free while it runs, and the event's record still gives
// the size the partition grew to.
func TestPlanReleasesUnusedMembers(t *testing.T) {
	ac := scheduler.DefaultConfig("template")
	ac.ReliefHeadroom = 0.4
	c := New(Options{Seed: 1, Agent: ac, MigrationTime: 20 * time.Second}, []scheduler.Host{
		host("h1", 8, server("a", 4), server("b", 3), server("c", 2)),
		host("h2", 8, server("t", 5.5)), // joins, unused by the plan
		host("h3", 8, server("u", 1)),
	})
	if !c.RunUntil(30*time.Second, func() bool { return c.Started > 0 }) {
		t.Fatal("no plan started")
	}
	c.Run(2 * time.Second) // the update reaches the members; the move is in flight
	if p := c.Agents["h2"].Partition(); p != nil {
		t.Fatalf("h2 still in partition %+v while a plan it has no part in runs", p)
	}
	for _, n := range []string{"h1", "h3"} {
		if p := c.Agents[n].Partition(); p == nil || p.State != scheduler.Finishing {
			t.Fatalf("%s: partition %+v, want Finishing (the plan uses it)", n, p)
		}
	}
	if !c.RunUntil(time.Minute, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
		t.Fatalf("still overloaded: %v", c.Overloaded())
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations: %v", c.Violations)
	}
	for _, r := range c.Records {
		if r.Record.Kind == scheduler.RecEventEnded && (r.Record.Outcome != scheduler.Solved || r.Record.Size != 3) {
			t.Fatalf("event ended %s with size %d, want solved with 3", r.Record.Outcome, r.Record.Size)
		}
	}
}

// Growth for relief headroom stays in the event host's availability zone
// (a site): where a host in its zone only fits and the roomy one is in
// another zone, the server goes to the one in its zone. The same hosts
// in one zone send it to the roomy host (TestReliefGrowsPastATightHost).
func TestReliefStaysInItsZone(t *testing.T) {
	ac := scheduler.DefaultConfig("template")
	ac.ReliefHeadroom = 0.4
	hosts := []scheduler.Host{
		host("h1", 8, server("a", 4), server("b", 3), server("c", 2)), // 9 of 8 cores
		host("h2", 8, server("t", 5.5)),                               // c fits: 7.5 of 8
		host("h3", 8, server("u", 1)),
		host("h4", 8, server("v", 1)), // the ring is larger than the partition
	}
	hosts[0].Zone, hosts[1].Zone, hosts[2].Zone, hosts[3].Zone = "site1", "site1", "site2", "site2"
	c := New(Options{Seed: 1, Agent: ac}, hosts)
	if !c.RunUntil(30*time.Second, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
		t.Fatalf("still overloaded: %v", c.Overloaded())
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations: %v", c.Violations)
	}
	if len(c.Moves) != 1 || c.Moves[0].To != "h2" {
		t.Fatalf("moves %+v, want one to h2 (in h1's zone)", c.Moves)
	}
}
