package sim

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// oracle is the floor dvms is measured against (`--mode oracle`): it sees
// the whole cloud every monitor interval with no coordination delay and
// costs Nova nothing to read, detects each host's event with the agents'
// K-of-N, solves it at once with the same solver over every host no plan
// is using, and executes the plan with the same executor (re-checks,
// migration durations) while it goes on detecting. What dvms loses
// against it is what its decentralization costs: the request's travel,
// the snapshots, partitions smaller than the cloud.
type oracle struct {
	whole
	detector

	mu   sync.Mutex
	busy map[string]bool // hosts of running plans
	wg   sync.WaitGroup
}

func newOracle(cloud *fake.Cloud, hosts []string, cfg Config, clock *node.Scaled, st *stats, seed int64) *oracle {
	return &oracle{whole: newWhole(cloud, hosts, cfg, clock, st, seed), detector: newDetector(cfg.Agent), busy: map[string]bool{}}
}

// detector is the oracle's event detection over whole-cloud samples: the
// agents' K-of-N, and their backoff after an event not solved.
type detector struct {
	agent  scheduler.Config
	window map[string][]scheduler.EventKind // last N samples per host
	retry  map[string]time.Time             // no event before (backoff)
	back   map[string]time.Duration         // next backoff
	seq    int
}

func newDetector(agent scheduler.Config) detector {
	return detector{agent: agent, window: map[string][]scheduler.EventKind{}, retry: map[string]time.Time{}, back: map[string]time.Duration{}}
}

// sample adds h's sample at now; it returns the event to raise, if any
// (none on a busy host: a running plan uses it).
func (d *detector) sample(now time.Time, h *scheduler.Host, busy bool) (scheduler.Event, bool) {
	thr, k, n := d.agent.Thresholds, d.agent.K, d.agent.N
	kind := scheduler.NoEvent
	switch {
	case h.Draining && len(h.Servers) > 0:
		kind = scheduler.Maintenance
	case thr.Overloaded(h):
		kind = scheduler.Overload
	}
	w := append(d.window[h.Name], kind)
	if len(w) > n {
		w = w[len(w)-n:]
	}
	d.window[h.Name] = w
	if busy || now.Before(d.retry[h.Name]) {
		return scheduler.Event{}, false
	}
	detected := kind == scheduler.Maintenance
	if !detected && kind == scheduler.Overload {
		c := 0
		for _, x := range w {
			if x == scheduler.Overload {
				c++
			}
		}
		detected = c >= k
	}
	if !detected {
		return scheduler.Event{}, false
	}
	d.seq++
	return scheduler.Event{ID: fmt.Sprintf("oracle-%d-%s", d.seq, h.Name), Kind: kind, Host: h.Name, Detected: now}, true
}

// ended takes ev's end into account: fresh samples before the host's
// next event, and the agents' backoff when it was not solved. It returns
// the record of the end.
func (d *detector) ended(ev scheduler.Event, out scheduler.Outcome, class scheduler.EndClass, size int, now time.Time) scheduler.Record {
	h := ev.Host
	d.window[h] = d.window[h][:0]
	if out == scheduler.Solved {
		d.back[h] = 0
	} else {
		b := d.back[h]
		if b == 0 {
			b = d.agent.RetryBackoff
		}
		d.retry[h] = now.Add(b)
		d.back[h] = min(2*b, d.agent.MaxRetryBackoff)
	}
	r := scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Outcome: out, Class: class, Size: size}
	if out == scheduler.Aborted {
		r.Reason = "re-checks skipped actions"
	}
	return r
}

// run samples every monitor interval until ctx ends, then waits for the
// plans it started.
func (o *oracle) run(ctx context.Context) {
	defer o.wg.Wait()
	tick := o.clock.NewTicker(o.cfg.Runtime.Monitor)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		o.round(ctx)
	}
}

func (o *oracle) round(ctx context.Context) {
	now := o.clock.Now()
	all := o.census(ctx, o.cloud.Uncharged())
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range all {
		ev, ok := o.sample(now, &all[i], o.busy[all[i].Name])
		if !ok {
			continue
		}
		o.st.record("oracle", scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev})
		o.solve(ctx, ev, all)
	}
}

// solve solves ev over the hosts no running plan uses (o.mu held) and
// starts its plan.
func (o *oracle) solve(ctx context.Context, ev scheduler.Event, all []scheduler.Host) {
	plan, used, size, ok := oraclePlan(o.cfg, ev, all, o.busy, o.rng, o.st)
	if !ok {
		o.ended(ev, scheduler.Unsolvable, scheduler.EndNoSolution, size)
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		ex := node.NewExecutor(o.cfg.Runtime.Exec, o.cloud, o.cloud, o.cfg.Agent.Thresholds, o.clock, zerolog.Nop())
		res := ex.Execute(ctx, ev, plan)
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, h := range used {
			delete(o.busy, h)
		}
		out, class := scheduler.Solved, scheduler.EndExecuted
		switch {
		case res.Failed > 0:
			out, class = scheduler.Failed, scheduler.EndActionFailed
		case res.Skipped > 0:
			out, class = scheduler.Aborted, scheduler.EndSkipped
		}
		o.ended(ev, out, class, size)
	}()
}

// oraclePlan solves ev over the hosts of all that are not busy (used by a
// running plan), as one partition; it records the plan, marks the hosts
// it uses busy and returns them with the plan, or false when ev has no
// solution there. size is the number of hosts solved over.
func oraclePlan(cfg Config, ev scheduler.Event, all []scheduler.Host, busy map[string]bool, rng *rand.Rand, st *stats) (plan scheduler.Plan, used []string, size int, ok bool) {
	// Other overloaded hosts are left out: the oracle relieves the
	// detected host only, as an agent's event does (K-of-N decides, not
	// the solver). Relieving every overloaded host in one whole-cloud
	// plan held a score of hosts busy through several steps and left
	// more overload, not less (doc/source/contributor/simulation.rst, --mode).
	thr := cfg.Agent.Thresholds
	free := make([]scheduler.Host, 0, len(all))
	for i := range all {
		h := &all[i]
		if !busy[h.Name] && (h.Name == ev.Host || !thr.Overloaded(h)) {
			free = append(free, *h)
		}
	}
	opt := scheduler.DefaultSolveOptions()
	opt.Rand = rand.New(rand.NewSource(rng.Int63()))
	lim := cfg.Agent.Limits
	lim.PerPartition = max(lim.PerPartition, cfg.Hosts) // the whole cloud is one partition
	began := time.Now()
	sol, plan, err := scheduler.SolveAndPlan(scheduler.Problem{Events: []scheduler.Event{ev}, Hosts: free, Thresholds: cfg.Agent.Thresholds, Preempt: cfg.Agent.Preempt}, lim, opt)
	st.solved(time.Since(began))
	if !sol.OK || err != nil || plan.Len() == 0 || !contains(sol.Solved, ev.ID) {
		return plan, nil, len(free), false
	}
	st.record("oracle", scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Moves: plan.Len()})
	used = []string{ev.Host}
	for _, step := range plan.Steps {
		for _, a := range step {
			used = append(used, a.From, a.To)
		}
	}
	for _, h := range used {
		busy[h] = true
	}
	return plan, used, len(free), true
}

// ended records ev's end (o.mu held).
func (o *oracle) ended(ev scheduler.Event, out scheduler.Outcome, class scheduler.EndClass, size int) {
	o.st.record("oracle", o.detector.ended(ev, out, class, size, o.clock.Now()))
}
