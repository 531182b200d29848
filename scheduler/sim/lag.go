package sim

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// lagPeriod is how often the lag watcher asks to be woken.
const lagPeriod = 100 * time.Millisecond

// RuntimeReport says how promptly the Go runtime ran the simulation's
// goroutines (wall-clock runs only): one goroutine asks to be woken
// every TickMS and records how late it ran. A process short of CPU (other
// processes on the machine, or more runnable goroutines than cores)
// wakes it late, and every other goroutine as late: memberlist's probe
// timers and packet readers included, so a live agent's ack can be read
// after its probe's timeout by the harness's doing, not the network's.
// It is a lower bound: the runtime runs a goroutine woken by a timer or
// a channel next on its processor (runnext), ahead of those already
// queued there, so one goroutine that wakes 10 times a second can see
// less of a long run queue than memberlist's packet readers do; a
// process the kernel does not run (other processes, stretched
// collections) delays it fully.
type RuntimeReport struct {
	TickMS float64 `json:"tick_ms"`
	Ticks  int     `json:"ticks"`
	// TickLag*: how late the ticks ran, over the whole wall run (warm-up
	// included), in milliseconds; TickLagMaxAtS: when the latest one ran,
	// in wall seconds after the run's start.
	TickLagP50MS  float64 `json:"tick_lag_p50_ms"`
	TickLagP99MS  float64 `json:"tick_lag_p99_ms"`
	TickLagMaxMS  float64 `json:"tick_lag_max_ms"`
	TickLagMaxAtS float64 `json:"tick_lag_max_at_s"`
	// TickLagMaxWarmupMS: the latest during the SWIM warm-up (0 without
	// one); TicksLateOver: how many ran more than LateOverMS late (half
	// the SWIM probe timeout with --membership swim, else 1 s).
	TickLagMaxWarmupMS float64 `json:"tick_lag_max_warmup_ms"`
	LateOverMS         float64 `json:"late_over_ms"`
	TicksLateOver      int     `json:"ticks_late_over"`
}

// lagSample is one tick: when it ran (after the watcher's start) and how
// late.
type lagSample struct {
	at, lag time.Duration
}

// lagWatch records how late the runtime wakes one goroutine. Safe for
// concurrent use: run writes, report reads.
type lagWatch struct {
	period time.Duration
	// now and after are the clock (time.Now and time.After in a run; a
	// fake in tests).
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	start   time.Time
	samples []lagSample
}

func newLagWatch(period time.Duration) *lagWatch {
	return &lagWatch{period: period, now: time.Now, after: time.After}
}

// run asks to be woken every period and records how late each wake-up
// came, until ctx ends.
func (w *lagWatch) run(ctx context.Context) {
	w.mu.Lock()
	w.start = w.now()
	w.mu.Unlock()
	for {
		due := w.now().Add(w.period)
		select {
		case <-ctx.Done():
			return
		case <-w.after(w.period):
		}
		woke := w.now()
		w.mu.Lock()
		w.samples = append(w.samples, lagSample{at: woke.Sub(w.start), lag: max(0, woke.Sub(due))})
		w.mu.Unlock()
	}
}

// report summarises the ticks so far; warmupEnd is when the warm-up
// ended (zero: none), lateOver the lag counted as late.
func (w *lagWatch) report(warmupEnd time.Time, lateOver time.Duration) *RuntimeReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &RuntimeReport{TickMS: ms(w.period), Ticks: len(w.samples), LateOverMS: ms(lateOver)}
	var warmup time.Duration
	if !warmupEnd.IsZero() {
		warmup = warmupEnd.Sub(w.start)
	}
	if len(w.samples) == 0 {
		return r
	}
	lags := make([]float64, len(w.samples))
	var worst lagSample
	for i, s := range w.samples {
		lags[i] = ms(s.lag)
		if s.lag > worst.lag {
			worst = s
		}
		if s.at <= warmup {
			r.TickLagMaxWarmupMS = max(r.TickLagMaxWarmupMS, ms(s.lag))
		}
		if s.lag > lateOver {
			r.TicksLateOver++
		}
	}
	pc := percentiles(lags)
	r.TickLagP50MS, r.TickLagP99MS, r.TickLagMaxMS = pc.P50, pc.P99, ms(worst.lag)
	r.TickLagMaxAtS = round(worst.at.Seconds())
	return r
}

// starved says, for a --membership swim run, why its membership figures
// may describe a starved process rather than SWIM: a probe's round trip
// waits on at least two wake-ups (the member's packet reader, then the
// prober's), so a goroutine woken later than half the probe timeout
// means acks could be read after their probe had given up. Empty when
// not.
func (r *RuntimeReport) starved() string {
	if r == nil || r.TicksLateOver == 0 {
		return ""
	}
	return fmt.Sprintf("the Go runtime woke a goroutine up to %.0f ms late (%d ticks over %.0f ms, half the SWIM probe timeout: a probe's round trip waits on two wake-ups; the latest %.0f s after the start): the process was starved of CPU, probes may have timed out on acks it had not yet read, and false deaths may come from that rather than from SWIM",
		r.TickLagMaxMS, r.TicksLateOver, r.LateOverMS, r.TickLagMaxAtS)
}
