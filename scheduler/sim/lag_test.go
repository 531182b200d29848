package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// fakeLagClock hands the watcher's wake-ups to the test: each after()
// is answered when the test advances the clock.
type fakeLagClock struct {
	now  time.Time
	reqs chan chan time.Time
}

func (c *fakeLagClock) after(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.reqs <- ch
	return ch
}

// The watcher records how late each wake-up came, and says when: three
// ticks on time, one 1.5 s late during the warm-up, one 300 ms late
// after it.
func TestLagWatchRecordsLateWakeups(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &fakeLagClock{now: t0, reqs: make(chan chan time.Time)}
	w := newLagWatch(100 * time.Millisecond)
	w.now = func() time.Time { return c.now }
	w.after = c.after
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	late := []time.Duration{0, 0, 1500 * time.Millisecond, 0, 300 * time.Millisecond}
	for _, l := range late {
		ch := <-c.reqs // the watcher is waiting: it read now already
		c.now = c.now.Add(100*time.Millisecond + l)
		ch <- c.now
	}
	<-c.reqs // the sixth wait: not answered
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not stop on cancel")
	}
	// Warm-up until 2 s after the start: the first four ticks (the late
	// one at 1.8 s).
	r := w.report(t0.Add(2*time.Second), time.Second)
	if r.Ticks != 5 || r.TickLagMaxMS != 1500 || r.TickLagMaxAtS != 1.8 || r.TickLagMaxWarmupMS != 1500 || r.TicksLateOver != 1 || r.TickLagP50MS != 0 {
		t.Fatalf("report %+v: want 5 ticks, max 1500 ms at 1.8 s (in the warm-up), 1 over 1 s, p50 0", r)
	}
	// Warm-up until 1 s: the late tick is after it.
	if r := w.report(t0.Add(time.Second), 200*time.Millisecond); r.TickLagMaxWarmupMS != 0 || r.TicksLateOver != 2 {
		t.Fatalf("report %+v: want no lag in the warm-up, 2 ticks over 200 ms", r)
	}
	if r := w.report(time.Time{}, time.Second); r.TickLagMaxWarmupMS != 0 {
		t.Fatalf("report %+v: no warm-up, want 0 in it", r)
	}
}

// On the real clock it ticks, and stops on cancel.
func TestLagWatchRealClock(t *testing.T) {
	w := newLagWatch(5 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	// It ticks: several ticks come (waited for, not hoped for in a fixed
	// 100 ms, which a busy machine may not give it).
	for deadline := time.Now().Add(10 * time.Second); w.report(time.Time{}, time.Second).Ticks < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("%d ticks in 10 s at 5 ms, want several", w.report(time.Time{}, time.Second).Ticks)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not stop on cancel")
	}
	n := w.report(time.Time{}, time.Second).Ticks
	time.Sleep(20 * time.Millisecond)
	if m := w.report(time.Time{}, time.Second).Ticks; m != n {
		t.Fatalf("ticks went on after cancel: %d then %d", n, m)
	}
}

// A SWIM run whose process woke a goroutine later than half the probe
// timeout is not valid, and says false deaths may come from that; a run with the
// ideal detector only reports the lag.
func TestValidityStarvedSwim(t *testing.T) {
	late := &RuntimeReport{TickLagMaxMS: 932, TicksLateOver: 3, LateOverMS: 500}
	prompt := &RuntimeReport{TickLagMaxMS: 43, LateOverMS: 500}
	swim := &MembershipReport{Kind: MembershipSwim}
	for _, tc := range []struct {
		name  string
		m     *MembershipReport
		rt    *RuntimeReport
		valid bool
	}{
		{"swim starved", swim, late, false},
		{"swim prompt", swim, prompt, true},
		{"swim virtual clock (no runtime report)", swim, nil, true},
		{"ideal starved", nil, late, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Membership: tc.m, Runtime: tc.rt}
			r.validity()
			if r.Valid != tc.valid {
				t.Fatalf("valid %t, want %t (%v)", r.Valid, tc.valid, r.InvalidBecause)
			}
			if !tc.valid && (len(r.InvalidBecause) != 1 || !strings.Contains(r.InvalidBecause[0], "false deaths may come from")) {
				t.Fatalf("reasons %q: want the starved process named", r.InvalidBecause)
			}
		})
	}
}
