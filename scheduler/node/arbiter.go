package node

import (
	"context"
	"errors"
	"sync"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/scheduler"
)

// CallArbiter makes one agent request to the merge arbiter and translates
// the answer into what the agent reads (ArbiterDone). It is the one
// translation: the runner and the deterministic simulator both call it.
// A refused Register or Dissolve is followed by a read of the partition's
// record, so the agent learns when its partition was absorbed meanwhile
// (Absorbed, Into) instead of reading only a reason string.
func CallArbiter(ctx context.Context, arb consensus.Arbiter, req scheduler.ArbiterRequest) scheduler.ArbiterResult {
	p := req.Part
	var d consensus.Decision
	var err error
	switch req.Op {
	case scheduler.ArbRegister:
		d, err = arb.Register(ctx, consensus.Registration{
			ID: p.ID, Version: p.Version, Initiator: p.Initiator, Leader: p.Leader, Nodes: p.Nodes,
			Lease: req.Lease,
		})
	case scheduler.ArbMerge:
		d, err = arb.Merge(ctx, consensus.Ref{ID: req.Absorb.ID, Version: req.Absorb.Version}, consensus.Ref{ID: p.ID, Version: p.Version})
	case scheduler.ArbDissolve:
		d, err = arb.Dissolve(ctx, consensus.Ref{ID: p.ID, Version: p.Version})
	case scheduler.ArbRead:
		rec, ok, gerr := arb.Get(ctx, p.ID)
		if gerr != nil {
			return scheduler.ArbiterResult{Err: gerr}
		}
		return scheduler.ArbiterResult{Committed: ok && !rec.Absorbed, Version: rec.Version, Nodes: rec.Nodes, Absorbed: rec.Absorbed, Into: rec.Into}
	}
	if err != nil {
		return scheduler.ArbiterResult{Unknown: errors.Is(err, consensus.ErrUnknownOutcome), Err: err}
	}
	res := scheduler.ArbiterResult{Committed: d.Committed, Reason: d.Reason, Version: d.Version, Nodes: d.Nodes}
	if !d.Committed && (req.Op == scheduler.ArbRegister || req.Op == scheduler.ArbDissolve) {
		if rec, ok, gerr := arb.Get(ctx, p.ID); gerr == nil && ok && rec.Absorbed {
			res.Absorbed, res.Into = true, rec.Into
		}
	}
	return res
}

// arbiterQueue is the runner's FIFO of arbiter requests: one goroutine
// makes them one after the other, in the order the agent asked, so a
// Ready holding [Register, Dissolve] is applied in that order (a Dissolve
// overtaking its Register would leave a registration nobody dissolves).
// push never blocks the agent's goroutine.
type arbiterQueue struct {
	mu   sync.Mutex
	reqs []scheduler.ArbiterRequest
	wake chan struct{} // capacity 1: something was pushed
}

func newArbiterQueue() *arbiterQueue { return &arbiterQueue{wake: make(chan struct{}, 1)} }

func (q *arbiterQueue) push(req scheduler.ArbiterRequest) {
	q.mu.Lock()
	q.reqs = append(q.reqs, req)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run serves the queue until ctx ends: call(req) for each request in
// order. Requests still queued when ctx ends are dropped (the agent's
// timeouts and leases cover them, as for a lost answer).
func (q *arbiterQueue) run(ctx context.Context, call func(scheduler.ArbiterRequest)) {
	for ctx.Err() == nil {
		q.mu.Lock()
		var req scheduler.ArbiterRequest
		ok := len(q.reqs) > 0
		if ok {
			req = q.reqs[0]
			q.reqs = q.reqs[1:]
		}
		q.mu.Unlock()
		if ok {
			call(req)
			continue
		}
		select {
		case <-ctx.Done():
		case <-q.wake:
		}
	}
}
