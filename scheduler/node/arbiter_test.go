package node

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/scheduler"
)

// slowRegister is an arbiter whose Register takes a while, as a Raft
// round trip does, while Dissolve answers at once.
type slowRegister struct {
	consensus.Arbiter
	delay time.Duration
}

func (s slowRegister) Register(ctx context.Context, r consensus.Registration) (consensus.Decision, error) {
	time.Sleep(s.delay)
	return s.Arbiter.Register(ctx, r)
}

// TestArbiterRequestsKeepTheirOrder: one Ready holding [Register,
// Dissolve] (a partition blocks, then ends at once) is applied in that
// order. Applied the other way round, Dissolve finds nothing registered
// and the Register that follows leaves a ghost Blocked record that other
// partitions could still merge (issue 11, point 2).
func TestArbiterRequestsKeepTheirOrder(t *testing.T) {
	local := consensus.NewLocal(time.Now)
	r := &Runner{
		d:       Deps{Arbiter: slowRegister{Arbiter: local, delay: 50 * time.Millisecond}},
		log:     zerolog.Nop(),
		results: make(chan func(*scheduler.Agent), 8),
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := scheduler.Partition{ID: "p1", Version: 3, Initiator: "h1", Leader: "h1", Nodes: []string{"h1"}, State: scheduler.Blocked}
	r.startArbiter(ctx, scheduler.ArbiterRequest{Op: scheduler.ArbRegister, Part: p, Lease: time.Minute})
	r.startArbiter(ctx, scheduler.ArbiterRequest{Op: scheduler.ArbDissolve, Part: p})
	for range 2 {
		select {
		case <-r.results:
		case <-time.After(5 * time.Second):
			t.Fatal("no arbiter answer")
		}
	}
	cancel()
	r.wg.Wait() // the queue's goroutine stops with ctx
	if rec, ok, _ := local.Get(context.Background(), "p1"); ok {
		t.Fatalf("ghost registration left behind: %+v (Dissolve applied before Register)", rec)
	}
}
