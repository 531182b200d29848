package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A wall-clock run compresses the protocol's timeouts by its time
// scale: at 20 x the snapshot timeout (1.5 s) is 75 ms of wall time, the
// hop timeout 2.5 ms. A machine busy with other work (another test run
// beside this one, on two cores) wakes goroutines later than that, and
// the run then measures the machine, not DVMS: events abort for want of
// a snapshot, partitions time out before they block, coordinates
// measure run queues. Safety must hold all the same, and is checked on
// every run; what a run achieved (events solved, merges, coordinates,
// SWIM's detections) is judged only on a run that kept up with its
// clock. A run that did not is run again at half the time scale (more
// wall time per simulated second, the same protocol), and after
// keepUpAttempts such runs the test is skipped, saying why.
const keepUpAttempts = 3

// runKeptUp runs c until a run keeps up (starved says why not, "" when
// it did) and returns that run's report. Each run is checked safe.
func runKeptUp(t *testing.T, c Config, starved func(Config, *Report) string) *Report {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		checkSafe(t, r)
		why := starved(c, r)
		if why == "" {
			return r
		}
		if attempt == keepUpAttempts {
			t.Skipf("%d runs did not keep up with their clock, the last at %g x: %s", attempt, c.TimeScale, why)
		}
		t.Logf("run %d at %g x did not keep up (%s): again at half the time scale", attempt, c.TimeScale, why)
		if c.TimeScale > 1 {
			c.TimeScale = max(1, c.TimeScale/2)
		}
	}
}

// lateOver says a run did not keep up when it is not valid by its own
// count (samples missed, SWIM probes starved) or when the Go runtime
// woke a goroutine later than limit of simulated time (its worst tick
// lag times the time scale).
func lateOver(limit func(Config) time.Duration) func(Config, *Report) string {
	return func(c Config, r *Report) string {
		if !r.Valid {
			return strings.Join(r.InvalidBecause, "; ")
		}
		if r.Runtime == nil {
			return ""
		}
		lag := time.Duration(r.Runtime.TickLagMaxMS * float64(time.Millisecond) * c.TimeScale)
		if l := limit(c); lag > l {
			return fmt.Sprintf("a goroutine woke %.0f ms late, %s of simulated time, over %s", r.Runtime.TickLagMaxMS, lag.Round(time.Millisecond), l)
		}
		return ""
	}
}

// protocolStarved: later than the snapshot timeout, the shortest one a
// partition's progress waits on.
var protocolStarved = lateOver(func(c Config) time.Duration { return c.Agent.SnapshotTimeout })

// A goroutine's lag counts in simulated time, against the limit.
func TestLateOverJudgesTheLagAtTheTimeScale(t *testing.T) {
	c := DefaultConfig()
	c.TimeScale = 20
	late := func(ms float64) *Report { return &Report{Valid: true, Runtime: &RuntimeReport{TickLagMaxMS: ms}} }
	if why := protocolStarved(c, late(70)); why != "" {
		t.Errorf("70 ms at 20 x (1.4 s simulated, timeout 1.5 s) called starved: %s", why)
	}
	if why := protocolStarved(c, late(80)); !strings.Contains(why, "1.6s of simulated time") {
		t.Errorf("80 ms at 20 x (1.6 s simulated) not called starved: %q", why)
	}
	c.TimeScale = 2
	if why := protocolStarved(c, late(80)); why != "" {
		t.Errorf("80 ms at 2 x called starved: %s", why)
	}
	if why := protocolStarved(c, &Report{InvalidBecause: []string{"samples missed"}}); why != "samples missed" {
		t.Errorf("a run not valid by its own count: %q", why)
	}
	if why := protocolStarved(c, &Report{Valid: true}); why != "" {
		t.Errorf("a virtual-clock run (no runtime report) called starved: %s", why)
	}
}
