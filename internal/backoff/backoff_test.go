package backoff

import (
	"testing"
	"time"
)

// TestDelayDoublesUpToMaxWithJitter: each delay lies in [d/2, d] where d
// doubles from Base after each failure and stops at Max.
func TestDelayDoublesUpToMaxWithJitter(t *testing.T) {
	lo := Policy{Base: time.Second, Max: 30 * time.Second, Rand: func(int64) int64 { return 0 }}
	hi := lo
	hi.Rand = func(n int64) int64 { return n - 1 }
	for attempt, d := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 100: 30 * time.Second} {
		if got := lo.Delay(attempt); got != d/2 {
			t.Errorf("attempt %d: shortest delay %s, want %s", attempt, got, d/2)
		}
		if got := hi.Delay(attempt); got != d {
			t.Errorf("attempt %d: longest delay %s, want %s", attempt, got, d)
		}
	}
	// The default random source stays within the bounds.
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for i := 0; i < 1000; i++ {
		if d := p.Delay(4); d < 400*time.Millisecond || d > 800*time.Millisecond {
			t.Fatalf("attempt 4: %s outside [400ms, 800ms]", d)
		}
	}
	if d := (Policy{}).Delay(3); d != 0 {
		t.Errorf("zero policy: %s, want 0", d)
	}
}
