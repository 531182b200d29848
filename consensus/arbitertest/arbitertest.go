// Package arbitertest is the behaviour suite every consensus.Arbiter
// passes: the single-process Local arbiter in the unit tier, the Raft one
// when it lands, so both enforce exactly the same merge rules.
package arbitertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/consensus"
)

// Clock lets the suite move the arbiter's time (the time stamped on
// entries) forward.
type Clock interface {
	Advance(d time.Duration)
}

// Run runs the suite; newArbiter returns a fresh arbiter and its clock.
func Run(t *testing.T, newArbiter func(t *testing.T) (consensus.Arbiter, Clock)) {
	ctx := context.Background()
	reg := func(id, initiator string, v uint64, nodes ...string) consensus.Registration {
		return consensus.Registration{ID: id, Version: v, Initiator: initiator, Leader: nodes[len(nodes)-1], Nodes: nodes, Lease: 10 * time.Second}
	}
	mustRegister := func(t *testing.T, a consensus.Arbiter, r consensus.Registration) {
		t.Helper()
		d, err := a.Register(ctx, r)
		if err != nil || !d.Committed {
			t.Fatalf("register %s: %+v %v", r.ID, d, err)
		}
	}

	t.Run("RegisterRefreshAndStale", func(t *testing.T) {
		a, _ := newArbiter(t)
		mustRegister(t, a, reg("p", "h1", 2, "h1", "h2"))
		mustRegister(t, a, reg("p", "h1", 3, "h1", "h2", "h3"))
		if d, _ := a.Register(ctx, reg("p", "h1", 2, "h1")); d.Committed {
			t.Fatal("stale registration accepted")
		}
		r, ok, err := a.Get(ctx, "p")
		if err != nil || !ok || r.Version != 3 || len(r.Nodes) != 3 {
			t.Fatalf("get: %+v %v %v", r, ok, err)
		}
		if d, _ := a.Register(ctx, consensus.Registration{ID: "bad"}); d.Committed || d.Reason == "" {
			t.Fatal("invalid registration accepted without a reason")
		}
	})

	t.Run("MergeFollowsInitiatorOrder", func(t *testing.T) {
		a, _ := newArbiter(t)
		mustRegister(t, a, reg("p", "h5", 2, "h5", "h6"))
		mustRegister(t, a, reg("q", "h2", 4, "h2", "h3"))
		if d, _ := a.Merge(ctx, consensus.Ref{ID: "q", Version: 4}, consensus.Ref{ID: "p", Version: 2}); d.Committed {
			t.Fatal("smaller initiator absorbed into a larger one")
		}
		d, err := a.Merge(ctx, consensus.Ref{ID: "p", Version: 2}, consensus.Ref{ID: "q", Version: 4})
		if err != nil || !d.Committed || d.Version != 5 || len(d.Nodes) != 4 {
			t.Fatalf("merge: %+v %v", d, err)
		}
		r, _, _ := a.Get(ctx, "p")
		if !r.Absorbed || r.Into != "q" {
			t.Fatalf("p after merge: %+v", r)
		}
	})

	t.Run("AbsorbedAtMostOnce", func(t *testing.T) {
		a, _ := newArbiter(t)
		mustRegister(t, a, reg("p", "h9", 1, "h9"))
		mustRegister(t, a, reg("q1", "h1", 1, "h1"))
		mustRegister(t, a, reg("q2", "h2", 1, "h2"))
		var wg sync.WaitGroup
		var mu sync.Mutex
		committed := 0
		for _, q := range []string{"q1", "q2", "q1", "q2"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := a.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: q, Version: 1})
				if err == nil && d.Committed {
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if committed != 1 {
			t.Fatalf("p absorbed %d times", committed)
		}
		if d, _ := a.Register(ctx, reg("p", "h9", 2, "h9")); d.Committed {
			t.Fatal("absorbed partition registered again")
		}
	})

	t.Run("StaleVersionsRefused", func(t *testing.T) {
		a, _ := newArbiter(t)
		mustRegister(t, a, reg("p", "h9", 3, "h9"))
		mustRegister(t, a, reg("q", "h1", 7, "h1"))
		for _, tc := range [][2]uint64{{2, 7}, {3, 6}, {4, 7}} {
			if d, _ := a.Merge(ctx, consensus.Ref{ID: "p", Version: tc[0]}, consensus.Ref{ID: "q", Version: tc[1]}); d.Committed || d.Reason == "" {
				t.Fatalf("merge at versions %v committed", tc)
			}
		}
		if d, _ := a.Merge(ctx, consensus.Ref{ID: "p", Version: 3}, consensus.Ref{ID: "nobody", Version: 1}); d.Committed {
			t.Fatal("merge into an unregistered partition committed")
		}
	})

	t.Run("Dissolve", func(t *testing.T) {
		a, _ := newArbiter(t)
		mustRegister(t, a, reg("p", "h9", 3, "h9"))
		if d, _ := a.Dissolve(ctx, consensus.Ref{ID: "p", Version: 2}); d.Committed {
			t.Fatal("stale dissolution committed")
		}
		if d, _ := a.Dissolve(ctx, consensus.Ref{ID: "p", Version: 3}); !d.Committed {
			t.Fatal("dissolution refused")
		}
		if _, ok, _ := a.Get(ctx, "p"); ok {
			t.Fatal("dissolved partition still held")
		}
	})

	t.Run("LeaseExpiresOnEntryTime", func(t *testing.T) {
		a, clock := newArbiter(t)
		mustRegister(t, a, reg("p", "h9", 1, "h9"))
		mustRegister(t, a, reg("q", "h1", 1, "h1"))
		clock.Advance(11 * time.Second)
		mustRegister(t, a, reg("q", "h1", 1, "h1")) // q refreshes; p's leader crashed
		if d, _ := a.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q", Version: 1}); d.Committed {
			t.Fatal("merge of an expired registration committed")
		}
	})
}
