// Package backoff computes capped exponential retry delays with jitter,
// for the waits that must not hammer a service that is down (NATS,
// Keystone and Nova at the agent's start-up).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy doubles the delay from Base after each failed attempt, up to
// Max, and draws each delay in [d/2, d] ("equal jitter") so that agents
// restarted together do not retry together.
type Policy struct {
	Base, Max time.Duration
	// Rand returns a number in [0, n); nil is math/rand/v2's Int64N.
	Rand func(n int64) int64
}

// Delay is the wait after the attempt-th failure (1 for the first).
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Base
	if d <= 0 {
		return 0
	}
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	r := p.Rand
	if r == nil {
		r = rand.Int64N
	}
	half := d / 2
	return half + time.Duration(r(int64(d-half)+1))
}
