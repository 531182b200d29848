package sim

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// central is the baseline DESIGN §7 compares against: one optimizer
// that periodically snapshots the whole cloud, runs the same solver over
// it for every overloaded or draining host, and executes the plan with
// the same executor — as Entropy or Watcher's continuous audits do.
type central struct {
	whole
	exec   *node.Executor
	rounds int
}

// whole is what the modes that see the whole cloud (central, oracle) share.
type whole struct {
	cloud *fake.Cloud
	hosts []string
	cfg   Config
	clock *node.Scaled
	st    *stats
	rng   *rand.Rand
}

func newWhole(cloud *fake.Cloud, hosts []string, cfg Config, clock *node.Scaled, st *stats, seed int64) whole {
	return whole{cloud: cloud, hosts: hosts, cfg: cfg, clock: clock, st: st, rng: rand.New(rand.NewSource(seed))}
}

// census samples every host through nc, as a monitor would.
func (w *whole) census(ctx context.Context, nc nova.Client) []scheduler.Host {
	all := make([]scheduler.Host, 0, len(w.hosts))
	for _, h := range w.hosts {
		sh, err := node.Sample(ctx, nc, w.cloud, h, w.cfg.Runtime.DrainReason)
		if err != nil {
			continue
		}
		all = append(all, sh)
	}
	return all
}

func newCentral(cloud *fake.Cloud, hosts []string, cfg Config, clock *node.Scaled, st *stats, seed int64) *central {
	ex := node.NewExecutor(cfg.Runtime.Exec, cloud, cloud, cfg.Agent.Thresholds, clock, zerolog.Nop())
	return &central{whole: newWhole(cloud, hosts, cfg, clock, st, seed), exec: ex}
}

// run loops until ctx ends: snapshot, solve, execute, wait for the period.
func (c *central) run(ctx context.Context) {
	for {
		start := c.clock.Now()
		c.round(ctx)
		wait := c.cfg.CentralPeriod - c.clock.Now().Sub(start)
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(wait):
		}
	}
}

func (c *central) round(ctx context.Context) {
	c.rounds++
	all := c.census(ctx, c.cloud)
	var events []scheduler.Event
	for i := range all {
		h := &all[i]
		var k scheduler.EventKind
		switch {
		case h.Draining && len(h.Servers) > 0:
			k = scheduler.Maintenance
		case c.cfg.Agent.Thresholds.Overloaded(h):
			k = scheduler.Overload
		default:
			continue
		}
		ev := scheduler.Event{ID: fmt.Sprintf("central-%d-%s", c.rounds, h.Name), Kind: k, Host: h.Name, Detected: c.clock.Now()}
		events = append(events, ev)
		c.st.record("central", scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev})
	}
	if len(events) == 0 {
		return
	}
	opt := scheduler.DefaultSolveOptions()
	opt.Rand = rand.New(rand.NewSource(c.rng.Int63()))
	opt.Now, opt.Deadline = time.Now, time.Now().Add(c.cfg.CentralSolveLimit)
	// One global problem: every overloaded host at once, falling back to
	// each event alone when the global one has no solution.
	lim := c.cfg.Agent.Limits
	lim.PerPartition = max(lim.PerPartition, len(c.hosts)) // the whole cloud is one "partition"
	began := time.Now()
	sol, plan, err := scheduler.SolveAndPlan(scheduler.Problem{Events: events, Hosts: all, Thresholds: c.cfg.Agent.Thresholds, Preempt: c.cfg.Agent.Preempt}, lim, opt)
	c.st.solved(time.Since(began))
	for _, ev := range events {
		if sol.OK && err == nil && contains(sol.Solved, ev.ID) {
			c.st.record("central", scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Moves: plan.Len()})
		}
	}
	var res node.ExecResult
	if sol.OK && err == nil && plan.Len() > 0 {
		res = c.exec.Execute(ctx, events[0], plan)
	}
	for _, ev := range events {
		o, class := scheduler.Unsolvable, scheduler.EndNoSolution
		switch {
		case !sol.OK || err != nil || !contains(sol.Solved, ev.ID):
		case res.Failed > 0:
			o, class = scheduler.Failed, scheduler.EndActionFailed
		case plan.Len() == 0:
			o, class = scheduler.Solved, scheduler.EndNothingToDo
		default:
			o, class = scheduler.Solved, scheduler.EndExecuted
		}
		c.st.record("central", scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Outcome: o, Class: class, Size: len(all)})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
