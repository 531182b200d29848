package detsim

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/dvms-project/dvms/consensus"
)

// faultyArbiter wraps the cluster's arbiter as a Raft group losing its
// leader would: with probability rate a request fails, half of the time
// before it is applied (ErrNoQuorum: nothing committed), half of the time
// after (ErrUnknownOutcome: committed, the answer lost). Reads never fail,
// so the agent's re-read after an unknown outcome always learns the truth.
type faultyArbiter struct {
	consensus.Arbiter
	rate float64
	rng  *rand.Rand
	// Unknown counts the requests applied whose answer was lost; NoQuorum
	// those refused before being applied.
	Unknown, NoQuorum int
}

func (f *faultyArbiter) fail(apply func() (consensus.Decision, error)) (consensus.Decision, error) {
	if f.rate <= 0 || f.rng.Float64() >= f.rate {
		return apply()
	}
	if f.rng.Intn(2) == 0 {
		f.NoQuorum++
		return consensus.Decision{}, fmt.Errorf("detsim: %w", consensus.ErrNoQuorum)
	}
	f.Unknown++
	_, _ = apply()
	return consensus.Decision{}, fmt.Errorf("detsim: leader lost after apply: %w", consensus.ErrUnknownOutcome)
}

func (f *faultyArbiter) Register(ctx context.Context, r consensus.Registration) (consensus.Decision, error) {
	return f.fail(func() (consensus.Decision, error) { return f.Arbiter.Register(ctx, r) })
}

func (f *faultyArbiter) Merge(ctx context.Context, p, q consensus.Ref) (consensus.Decision, error) {
	return f.fail(func() (consensus.Decision, error) { return f.Arbiter.Merge(ctx, p, q) })
}

func (f *faultyArbiter) Dissolve(ctx context.Context, r consensus.Ref) (consensus.Decision, error) {
	return f.fail(func() (consensus.Decision, error) { return f.Arbiter.Dissolve(ctx, r) })
}
