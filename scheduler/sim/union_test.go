package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// The union check of an unsolvable event (issue 11, point 6) counts the
// partitions Blocked when the event was given up, not partitions that
// blocked a moment before and went on since: one that grew again and is
// running its plan, one absorbed, one ended. (It counted every partition
// that blocked in the last half second of wall time: at --time-scale 10
// a partition blocked 5 simulated seconds ago and executing a plan on
// its nodes since made an event look like a merge miss.)
func TestUnionCountsPartitionsBlockedNow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newStats := func() *stats {
		return &stats{raised: map[string]time.Time{}, inFlight: map[string]bool{}, ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{},
			simNow: func() time.Time { return now }, raisedSim: map[string]time.Time{}}
	}
	blocked := func(id string, v uint64, nodes ...string) scheduler.Record {
		return scheduler.Record{Kind: scheduler.RecBlocked, Partition: id, Version: v, Nodes: nodes}
	}
	given := scheduler.Record{Kind: scheduler.RecEventEnded, Outcome: scheduler.Unsolvable, Partition: "p", Version: 4,
		Event: scheduler.Event{ID: "ev-a", Host: "a"}, Nodes: []string{"a", "b"}}
	for _, tc := range []struct {
		name   string
		before []scheduler.Record
		want   []string
	}{
		{"still blocked", []scheduler.Record{blocked("q", 3, "c", "d")}, []string{"a", "b", "c", "d"}},
		{"grew again", []scheduler.Record{blocked("q", 3, "c", "d"), {Kind: scheduler.RecJoined, Partition: "q", Version: 4}}, []string{"a", "b"}},
		{"a fork joined", []scheduler.Record{blocked("q", 3, "c", "d"), {Kind: scheduler.RecJoined, Partition: "q", Version: 3}}, []string{"a", "b", "c", "d"}},
		{"planned", []scheduler.Record{blocked("q", 3, "c", "d"), {Kind: scheduler.RecPlanned, Partition: "q", Version: 5}}, []string{"a", "b"}},
		{"dissolved", []scheduler.Record{blocked("q", 3, "c", "d"), {Kind: scheduler.RecDissolved, Partition: "q", Version: 3}}, []string{"a", "b"}},
		{"absorbed", []scheduler.Record{blocked("q", 3, "c", "d"), blocked("r", 2, "e"),
			{Kind: scheduler.RecMergeCommitted, Partition: "r", Version: 4, Absorbed: "q"}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStats()
			for _, r := range tc.before {
				s.record("x", r)
			}
			s.record("a", given)
			if len(s.unsolvable) != 1 {
				t.Fatalf("unsolvable events %d, want 1", len(s.unsolvable))
			}
			if got := s.unsolvable[0].rec.Nodes; !slices.Equal(got, tc.want) {
				t.Fatalf("union %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("blocked long ago and never heard of", func(t *testing.T) {
		s := newStats()
		s.record("x", blocked("q", 3, "c"))
		now = now.Add(blockedGuard + time.Second)
		s.record("a", given)
		if got := s.unsolvable[0].rec.Nodes; !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("union %v, want [a b]", got)
		}
	})
}

// The union is also kept as the Blocked partitions' leaders last solved
// it (the snapshots they had): the check of what merges must never miss
// runs on that, not on the cloud a moment later.
func TestUnionKeepsTheLeadersViews(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &stats{raised: map[string]time.Time{}, inFlight: map[string]bool{}, ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{},
		simNow: func() time.Time { return now }, raisedSim: map[string]time.Time{}}
	view := func(id string, hosts ...string) scheduler.SolveRequest {
		req := scheduler.SolveRequest{PartID: id}
		for _, h := range hosts {
			req.Problem.Hosts = append(req.Problem.Hosts, scheduler.Host{Name: h, CPUs: 16})
		}
		return req
	}
	s.viewed(view("p", "a"))
	s.viewed(view("p", "a", "b")) // the last solve counts
	s.viewed(view("q", "c", "d"))
	s.viewed(view("r", "e"))
	s.record("c", scheduler.Record{Kind: scheduler.RecBlocked, Partition: "q", Version: 3, Nodes: []string{"c", "d"}})
	s.record("e", scheduler.Record{Kind: scheduler.RecBlocked, Partition: "r", Version: 1, Nodes: []string{"e"}})
	s.record("e", scheduler.Record{Kind: scheduler.RecJoined, Partition: "r", Version: 2}) // r grew: not Blocked
	s.record("a", scheduler.Record{Kind: scheduler.RecEventEnded, Outcome: scheduler.Unsolvable, Partition: "p", Version: 4,
		Event: scheduler.Event{ID: "ev-a", Host: "a"}, Nodes: []string{"a", "b"}})
	if len(s.unsolvable) != 1 {
		t.Fatalf("unsolvable events %d, want 1", len(s.unsolvable))
	}
	var names []string
	for _, h := range s.unsolvable[0].view {
		names = append(names, h.Name)
	}
	slices.Sort(names)
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(names, want) {
		t.Fatalf("union as the leaders saw it %v, want %v", names, want)
	}
	// A dissolved partition's view is kept while members may still
	// report their own events of it, then dropped.
	s.record("c", scheduler.Record{Kind: scheduler.RecDissolved, Partition: "q"})
	if _, ok := s.views["q"]; !ok {
		t.Fatal("view dropped at once when its partition dissolved")
	}
	now = now.Add(blockedGuard + time.Second)
	for i := range 256 {
		s.viewEnded(fmt.Sprintf("x%d", i))
	}
	if _, ok := s.views["q"]; ok {
		t.Fatal("a view kept long after its partition dissolved")
	}
}
