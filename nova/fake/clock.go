package fake

import (
	"sync"
	"time"
)

// Clock is the fake's only source of time. The cloud reads it at every
// call and applies what fell due (migrations ending); it never sleeps
// and starts no goroutine. Implementations must be safe for concurrent
// use and must not go backwards.
type Clock interface{ Now() time.Time }

// Waiter is a Clock a caller can wait on: After's channel delivers once
// d of the clock's time has passed. With a Waiter, a call to the cloud
// really takes its API latency (Config.APIRate, APILatency); with a
// plain Clock the latency is charged on the meter only. ManualClock,
// ScaledClock and scheduler/node's clocks are Waiters.
type Waiter interface {
	Clock
	After(d time.Duration) <-chan time.Time
}

// ManualClock is a Clock that moves only when a test calls Advance.
// Safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	t       time.Time
	waiters []manualWaiter
}

type manualWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (a negative d is ignored: the
// clock never goes back).
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.t
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// After implements Waiter: the channel delivers once Advance has moved
// the clock d past now (at once for d <= 0).
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.t
		return ch
	}
	c.waiters = append(c.waiters, manualWaiter{at: c.t.Add(d), ch: ch})
	return ch
}

// Waiting is how many After channels have not delivered yet (tests use
// it to know a call is blocked on the clock).
func (c *ManualClock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// ScaledClock is the wall clock sped up by Factor, reading Epoch at the
// moment it was created. `dvms simulate` uses it so that an hour of
// cloud time passes in a minute. Safe for concurrent use (immutable).
type ScaledClock struct {
	epoch  time.Time
	start  time.Time // wall time at creation, with its monotonic reading
	factor float64
}

// NewScaledClock returns a clock reading epoch now and running factor
// times faster than the wall clock. A factor <= 0 is taken as 1.
func NewScaledClock(epoch time.Time, factor float64) *ScaledClock {
	if factor <= 0 {
		factor = 1
	}
	return &ScaledClock{epoch: epoch, start: time.Now(), factor: factor}
}

// Now implements Clock.
func (c *ScaledClock) Now() time.Time {
	return c.epoch.Add(time.Duration(float64(time.Since(c.start)) * c.factor))
}

// After implements Waiter, in wall time d / Factor.
func (c *ScaledClock) After(d time.Duration) <-chan time.Time { return time.After(c.Wall(d)) }

// Factor is how many times faster than the wall clock c runs.
func (c *ScaledClock) Factor() float64 { return c.factor }

// Wall converts a duration of c's time into wall time (at least 1 µs),
// for callers that must really wait for cloud time to pass.
func (c *ScaledClock) Wall(d time.Duration) time.Duration {
	w := time.Duration(float64(d) / c.factor)
	if w < time.Microsecond {
		w = time.Microsecond
	}
	return w
}
