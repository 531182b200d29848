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
	window map[string][]scheduler.EventKind // last N samples per host
	retry  map[string]time.Time             // no event before (backoff)
	back   map[string]time.Duration         // next backoff
	seq    int

	mu   sync.Mutex
	busy map[string]bool // hosts of running plans
	wg   sync.WaitGroup
}

func newOracle(cloud *fake.Cloud, hosts []string, cfg Config, clock *node.Scaled, st *stats, seed int64) *oracle {
	return &oracle{whole: newWhole(cloud, hosts, cfg, clock, st, seed),
		window: map[string][]scheduler.EventKind{}, retry: map[string]time.Time{}, back: map[string]time.Duration{}, busy: map[string]bool{}}
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
	thr, k, n := o.cfg.Agent.Thresholds, o.cfg.Agent.K, o.cfg.Agent.N
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range all {
		h := &all[i]
		kind := scheduler.NoEvent
		switch {
		case h.Draining && len(h.Servers) > 0:
			kind = scheduler.Maintenance
		case thr.Overloaded(h):
			kind = scheduler.Overload
		}
		w := append(o.window[h.Name], kind)
		if len(w) > n {
			w = w[len(w)-n:]
		}
		o.window[h.Name] = w
		if o.busy[h.Name] || now.Before(o.retry[h.Name]) {
			continue
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
			continue
		}
		o.seq++
		ev := scheduler.Event{ID: fmt.Sprintf("oracle-%d-%s", o.seq, h.Name), Kind: kind, Host: h.Name, Detected: now}
		o.st.record("oracle", scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev})
		o.solve(ctx, ev, all)
	}
}

// solve solves ev over the hosts no running plan uses (o.mu held) and
// starts its plan.
func (o *oracle) solve(ctx context.Context, ev scheduler.Event, all []scheduler.Host) {
	free := make([]scheduler.Host, 0, len(all))
	for _, h := range all {
		if !o.busy[h.Name] {
			free = append(free, h)
		}
	}
	opt := scheduler.DefaultSolveOptions()
	opt.Rand = rand.New(rand.NewSource(o.rng.Int63()))
	lim := o.cfg.Agent.Limits
	lim.PerPartition = max(lim.PerPartition, len(o.hosts)) // the whole cloud is one partition
	began := time.Now()
	sol, plan, err := scheduler.SolveAndPlan(scheduler.Problem{Events: []scheduler.Event{ev}, Hosts: free, Thresholds: o.cfg.Agent.Thresholds, Preempt: o.cfg.Agent.Preempt}, lim, opt)
	o.st.solved(time.Since(began))
	if !sol.OK || err != nil || plan.Len() == 0 || !contains(sol.Solved, ev.ID) {
		o.ended(ev, scheduler.Unsolvable, len(free))
		return
	}
	o.st.record("oracle", scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Moves: plan.Len()})
	var used []string
	for _, step := range plan.Steps {
		for _, a := range step {
			used = append(used, a.From, a.To)
		}
	}
	used = append(used, ev.Host)
	for _, h := range used {
		o.busy[h] = true
	}
	size := len(free)
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
		out := scheduler.Solved
		switch {
		case res.Failed > 0:
			out = scheduler.Failed
		case res.Skipped > 0:
			out = scheduler.Aborted
		}
		o.ended(ev, out, size)
	}()
}

// ended records ev's end (o.mu held): fresh samples before the host's
// next event, and the agents' backoff when it was not solved.
func (o *oracle) ended(ev scheduler.Event, out scheduler.Outcome, size int) {
	h := ev.Host
	o.window[h] = o.window[h][:0]
	if out == scheduler.Solved {
		o.back[h] = 0
	} else {
		b := o.back[h]
		if b == 0 {
			b = o.cfg.Agent.RetryBackoff
		}
		o.retry[h] = o.clock.Now().Add(b)
		o.back[h] = min(2*b, o.cfg.Agent.MaxRetryBackoff)
	}
	r := scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Outcome: out, Size: size}
	if out == scheduler.Aborted {
		r.Reason = "re-checks skipped actions"
	}
	o.st.record("oracle", r)
}
