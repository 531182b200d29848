package consensus

import (
	"context"
	"sync"
	"time"
)

// Local is a single-process arbiter: the FSM behind a mutex, stamped with
// an injected clock. It enforces exactly the rules of the Raft arbiter but
// is not replicated: it is for `dvms simulate` (one process) and tests,
// not for a deployment of separate agents.
type Local struct {
	mu  sync.Mutex
	fsm *FSM
	now func() time.Time
}

// NewLocal returns a Local arbiter reading time from now.
func NewLocal(now func() time.Time) *Local {
	return &Local{fsm: NewFSM(), now: now}
}

func (l *Local) apply(ctx context.Context, c Command) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Time = l.now()
	return l.fsm.Apply(c), nil
}

// Register implements Arbiter.
func (l *Local) Register(ctx context.Context, r Registration) (Decision, error) {
	return l.apply(ctx, Command{Op: OpRegister, Reg: r})
}

// Merge implements Arbiter.
func (l *Local) Merge(ctx context.Context, p, q Ref) (Decision, error) {
	return l.apply(ctx, Command{Op: OpMerge, P: p, Q: q})
}

// Dissolve implements Arbiter.
func (l *Local) Dissolve(ctx context.Context, r Ref) (Decision, error) {
	return l.apply(ctx, Command{Op: OpDissolve, P: r})
}

// Get implements Arbiter.
func (l *Local) Get(ctx context.Context, id string) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.fsm.Get(id)
	return r, ok, nil
}

var _ Arbiter = (*Local)(nil)
