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
// keepUpAttempts such runs the test is skipped, saying why. Nor is a
// run started again once the package has run for keepUpBudget: on a
// machine that starves the runs (another test run beside this one) the
// retries were most of the package's time (TestSimulateSwimMembership
// ran 60 s three times, TestSimulateSites 35 s three times, and both were
// skipped after 245 and 294 s) and the package alone took 338 s; a
// machine that keeps up never retries this late.
const keepUpAttempts = 3

// keepUpBudget: no run is started again after this much of the
// package's wall time (keepUpBy).
const keepUpBudget = 2 * time.Minute

// keepUpBy is when the package stops starting runs again.
var keepUpBy = time.Now().Add(keepUpBudget)

// runKeptUp runs c until a run keeps up (starved says why not, "" when
// it did) and returns that run's report. Each run is checked safe.
func runKeptUp(t *testing.T, c Config, starved func(Config, *Report) string) *Report {
	t.Helper()
	return keepUp(t, c, starved, func(c Config) (*Report, error) { return Run(context.Background(), c) }, keepUpBy)
}

// keepUp is runKeptUp with its runs made by run, none started again after
// by.
func keepUp(t *testing.T, c Config, starved func(Config, *Report) string, run func(Config) (*Report, error), by time.Time) *Report {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r, err := run(c)
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
		if time.Now().After(by) {
			t.Skipf("%d runs did not keep up with their clock, the last at %g x, and the package's %s for runs again is spent: %s", attempt, c.TimeScale, keepUpBudget, why)
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

// A run that did not keep up is run again at half the time scale, at
// most keepUpAttempts times in all, and not once the package's budget is
// spent; safety is checked on every run.
func TestKeepUpRetriesWithinItsBudget(t *testing.T) {
	starved := func(Config, *Report) string { return "starved" }
	for _, tc := range []struct {
		name   string
		by     time.Time
		scales []float64
	}{{"in time", time.Now().Add(time.Hour), []float64{8, 4, 2}}, {"budget spent", time.Now().Add(-time.Second), []float64{8}}} {
		var scales []float64
		ok := t.Run(tc.name, func(t *testing.T) {
			keepUp(t, Config{TimeScale: 8}, starved, func(c Config) (*Report, error) {
				scales = append(scales, c.TimeScale)
				return &Report{}, nil
			}, tc.by)
			t.Error("a run that never kept up was judged")
		})
		if !ok || fmt.Sprint(scales) != fmt.Sprint(tc.scales) {
			t.Errorf("%s: runs at %v x (passed or skipped: %v), want %v and a skip", tc.name, scales, ok, tc.scales)
		}
	}
}

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
