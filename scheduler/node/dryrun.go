package node

// The drain dry run (`dvms drain --dry-run HOST`): the plan the region's
// agents would make for HOST's maintenance, made by the agents' own code
// (scheduler.Agent: detection, growth along the next-node order, snapshot
// collection, relief headroom, tours; scheduler.SolveAndPlan), one agent
// per compute host in this process, their messages delivered at once.
// Nothing is disabled or moved: the run stops at the plan the agents
// would hand to their executor. Read-only on Nova: the compute hosts
// once, then the servers of each host the partition's request visits.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// DryRunConfig is what the dry run needs besides the cloud.
type DryRunConfig struct {
	// Agent is the agents' configuration (ID is set per host).
	Agent scheduler.Config
	// MaxHosts: the run gives up once the partition would exceed it.
	MaxHosts int
	// Seed of the solver's randomized restarts.
	Seed int64
	// Tick is the virtual time between two rounds of ticks when no
	// message is in flight; Horizon bounds the virtual time of the run.
	Tick, Horizon time.Duration
}

// DefaultDryRunConfig returns the defaults for host's drain.
func DefaultDryRunConfig(host string) DryRunConfig {
	return DryRunConfig{Agent: scheduler.DefaultConfig(host), MaxHosts: 16, Seed: 1, Tick: 100 * time.Millisecond, Horizon: 10 * time.Minute}
}

// DrainPlan is the dry run's outcome.
type DrainPlan struct {
	// Hosts of the partition when it last solved or gave up (its
	// initiator first, then in the order they joined; the agents release
	// the members the plan does not use as it starts).
	Hosts []string
	// Sol and Plan: the last solution and the plan the agents would
	// execute (Plan empty when Sol.OK is false).
	Sol  scheduler.Solution
	Plan scheduler.Plan
	// Reason says why there is no plan.
	Reason string
	// Visited counts the agents the run needed (one servers list each).
	Visited int
}

// errDone ends the delivery loop.
var errDone = errors.New("done")

// PlanDrain computes the plan that would empty host, as its agents would
// with servers counted at their flavor (the CLI does not measure them:
// the agents do, so their plan may pack tighter).
func PlanDrain(ctx context.Context, cl nova.Client, host string, dc DryRunConfig) (DrainPlan, error) {
	var out DrainPlan
	if dc.MaxHosts < 2 {
		return out, errors.New("dry run: at least 2 hosts (the host and one destination)")
	}
	all, err := cl.Hosts(ctx)
	if err != nil {
		return out, fmt.Errorf("list compute hosts: %w", err)
	}
	byName := map[string]nova.Host{}
	names := make([]string, 0, len(all))
	for _, h := range all {
		byName[h.Name] = h
		names = append(names, h.Name)
	}
	if _, ok := byName[host]; !ok {
		return out, fmt.Errorf("nova has no compute host %q (`openstack compute service list` names them)", host)
	}
	r := &dryRun{ctx: ctx, cl: cl, cfg: dc, target: host, byName: byName, ring: scheduler.NewRing(names),
		agents: map[string]*scheduler.Agent{}, now: time.Now(), out: &out}
	a, err := r.agent(host)
	if err == nil {
		err = r.drive(a)
	}
	if errors.Is(err, errDone) {
		err = nil
	}
	out.Visited = len(r.agents)
	return out, err
}

// dryRun is one run: the agents made so far and the messages in flight.
type dryRun struct {
	ctx    context.Context
	cl     nova.Client
	cfg    DryRunConfig
	target string
	byName map[string]nova.Host
	ring   scheduler.Ring
	agents map[string]*scheduler.Agent
	queue  []scheduler.Envelope
	now    time.Time
	out    *DrainPlan
}

// agent returns host's agent, made on first use from Nova's view of the
// host (its servers only when it takes servers or is the one drained).
func (r *dryRun) agent(host string) (*scheduler.Agent, error) {
	if a, ok := r.agents[host]; ok {
		return a, nil
	}
	h, ok := r.byName[host]
	if !ok {
		return nil, fmt.Errorf("message for %q, which Nova does not list", host)
	}
	cfg := r.cfg.Agent
	cfg.ID = host
	a, err := scheduler.NewAgentOnRing(cfg, r.ring)
	if err != nil {
		return nil, err
	}
	var ss []nova.Server
	sh := ToHost(h, nil, nil, nil)
	if host == r.target || !sh.Disabled { // a host that takes no server is never a destination
		if ss, err = r.cl.Servers(r.ctx, host); err != nil {
			return nil, fmt.Errorf("servers of %s: %w", host, err)
		}
	}
	flavor := make(map[string]nova.Demand, len(ss)) // the most each can use
	for _, sv := range ss {
		flavor[sv.ID] = nova.Demand{CPU: float64(sv.VCPUs), RAMMB: float64(sv.RAMMB)}
	}
	sh = ToHost(h, ss, flavor, nil)
	r.agents[host] = a
	if host != r.target {
		// Only the drained host raises an event: the others are as
		// paused agents (they join partitions, raise nothing).
		a.Control(true, false)
		a.Observe(r.now, sh)
		return a, nil
	}
	sh.Draining = true // as if drained now
	movable := 0
	for _, sv := range sh.Servers {
		if !sv.Fixed {
			movable++
		}
	}
	if movable == 0 { // no event would fire
		r.out.Sol = scheduler.Solution{OK: true, Reason: "nothing to move"}
		r.out.Hosts = []string{host}
		return a, errDone
	}
	for range cfg.N { // the event fires after debounce_k samples
		a.Observe(r.now, sh)
	}
	return a, nil
}

// drive runs the agents from first's output until the plan, the event's
// end, the partition's bound or the horizon.
func (r *dryRun) drive(first *scheduler.Agent) error {
	if err := r.handle(first); err != nil {
		return err
	}
	end := r.now.Add(r.cfg.Horizon)
	for r.now.Before(end) {
		for len(r.queue) > 0 {
			env := r.queue[0]
			r.queue = r.queue[1:]
			a, err := r.agent(env.To)
			if err != nil {
				return err
			}
			a.Step(env.Msg)
			if err := r.handle(a); err != nil {
				return err
			}
		}
		r.now = r.now.Add(r.cfg.Tick)
		for _, a := range r.agents {
			a.Tick(r.now)
			if err := r.handle(a); err != nil {
				return err
			}
		}
	}
	r.out.Reason = fmt.Sprintf("no plan within %s of the agents' time", r.cfg.Horizon)
	return errDone
}

// handle does what a's output asks, as the runtime would, short of
// executing a plan.
func (r *dryRun) handle(a *scheduler.Agent) error {
	for {
		rd := a.Ready()
		if rd.Empty() {
			return nil
		}
		r.queue = append(r.queue, rd.Messages...)
		if p := a.Partition(); p != nil && len(p.Nodes) > r.cfg.MaxHosts {
			r.out.Hosts = p.Nodes[:r.cfg.MaxHosts]
			r.out.Plan = scheduler.Plan{}
			r.out.Reason = fmt.Sprintf("no plan within %d hosts", r.cfg.MaxHosts)
			return errDone
		}
		for _, req := range rd.Solve {
			opt := scheduler.DefaultSolveOptions()
			opt.Rand = rand.New(rand.NewSource(r.cfg.Seed))
			opt.Now, opt.Deadline = time.Now, time.Now().Add(req.Timeout)
			sol, plan, perr := scheduler.SolveAndPlan(req.Problem, req.Limits, opt)
			r.out.Sol, r.out.Hosts = sol, hostNames(req.Problem.Hosts)
			if perr != nil {
				r.out.Reason = perr.Error()
			}
			a.SolveDone(req.PartID, req.Version, sol, plan, perr)
		}
		for _, ex := range rd.Execute {
			// The agents' plan: stop before the executor.
			r.out.Plan, r.out.Reason = ex.Plan, ""
			return errDone
		}
		for _, req := range rd.Arbiter {
			// One partition in the run: registering is all it does.
			a.ArbiterDone(req, scheduler.ArbiterResult{Committed: req.Op == scheduler.ArbRegister, Reason: "dry run: no other partition"})
		}
		for _, rec := range rd.Records {
			if rec.Kind == scheduler.RecEventEnded && rec.Event.Host == r.target {
				r.out.Plan = scheduler.Plan{}
				if r.out.Sol.OK && rec.Outcome == scheduler.Solved {
					return errDone // nothing to do
				}
				r.out.Sol.OK = false
				r.out.Reason = rec.Reason
				return errDone
			}
		}
	}
}

func hostNames(hs []scheduler.Host) []string {
	out := make([]string, len(hs))
	for i := range hs {
		out[i] = hs[i].Name
	}
	return out
}
