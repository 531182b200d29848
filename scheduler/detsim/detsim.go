// Package detsim is a deterministic simulator of many DVMS agents: one
// goroutine, a virtual clock, an in-memory message queue with loss, delay
// and crash hooks, the single-process merge arbiter, a ground-truth cloud
// that plans are applied to, and safety checks after every step (DESIGN
// §8). A failure replays from its seed. The runtime's decisions are not
// imitated here: detsim calls scheduler/node's step functions on what its
// ground truth shows — the executor's re-check (node.PlanCheck), the
// plan's outcome (node.PlanOutcome), the monitor's refresh schedule
// (node.Refresh) and the maintenance watch (node.WatchStep) — and counts
// the Nova calls they make, each passed through nova/fake's model of the
// region's API (latency, queue; nova.go). Each agent's decision part is
// built as every agent of the fleet is (agentd.NewDecision, from
// Options.Agent and Options.Node): its state machine and its executor's
// re-check verdict are the assembly's. It is for tests and for exploring
// the protocol at scale (`dvms simulate --clock virtual`); `--clock wall`
// runs the runtime's goroutines over NATS and nova/fake.
package detsim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"time"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/agentd"
	"github.com/dvms-project/dvms/scheduler/fit"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Options tune a cluster.
type Options struct {
	Seed int64
	// Step is the virtual time advanced by one Step (default 50 ms).
	Step time.Duration
	// Latency of a message (default 1 ms); Jitter adds up to that much.
	Latency, Jitter time.Duration
	// Delay, if set, adds a link's delay to messages from one host to
	// another (sites: half the RTT between their sites).
	Delay func(from, to string) time.Duration
	// Drop is the probability a message is lost; Dup that it is delivered twice.
	Drop, Dup float64
	// MigrationTime is how long one action of a plan takes (default 2 s);
	// MigrationDuration, if set, gives each live migration its own (a
	// plan's step ends with its longest move).
	MigrationTime     time.Duration
	MigrationDuration func(scheduler.Action) time.Duration
	// EventDriven: Step advances virtual time to the next thing that
	// happens (a message delivery, the end of a plan's step, the agents'
	// next tick or sample) instead of by Step: messages arrive at their
	// own time, and nothing is done for time in which nothing happens.
	EventDriven bool
	// CheckEvery runs the whole-cloud safety check (every server on one
	// host, executing partitions disjoint) once per this much virtual
	// time instead of after every step; 0: after every step. The checks
	// at each move's start and end run always.
	CheckEvery time.Duration
	// OnRecord, if set, receives the agents' records as they are emitted,
	// and Records stays empty (a long run keeps no history).
	OnRecord func(Rec)
	// OnSolve, if set, is told the solver's own (wall) time of each solve.
	OnSolve func(took time.Duration)
	// OnSolveRequest, if set, is given each solve request before it is
	// solved (the hosts a leader solves over).
	OnSolveRequest func(scheduler.SolveRequest)
	// BeforeSample, if set, is called at each second before the agents
	// sample their hosts (a harness changes demand there, so a sample
	// and a re-check just after it see the same second's demand).
	BeforeSample func(now time.Time)
	// NoAgents: the cluster runs no agent; it is a ground truth whose
	// clock, re-checks and migrations serve a planner outside (Execute).
	NoAgents bool
	// Recheck re-checks each action when it starts with the runtime
	// executor's own verdict (node.PlanCheck) and skips what it skips.
	// Without it, any stale plan shows up as a violation.
	Recheck bool
	// ArbiterFaults is the probability that an arbiter request fails as
	// when the Raft leader is lost: half before it is applied (no quorum),
	// half after (outcome unknown: the agent must re-read).
	ArbiterFaults float64
	// Agent configures every agent (ID is filled in).
	Agent scheduler.Config
	// Node is the runtime's configuration whose periods the cluster runs
	// (the monitor's refresh, the region's watch, the executor's poll)
	// and whose drain reason its re-checks judge with (agentd.Decision);
	// zero: node.DefaultConfig().
	Node node.Config
	// NovaRate is the region's API capacity in requests a second (0:
	// unlimited) and NovaLatency every request's own latency, as
	// nova/fake models them (fake.API; nova.go).
	NovaRate    float64
	NovaLatency time.Duration
}

// Rec is a record an agent emitted, with its host and time.
type Rec struct {
	Host string
	At   time.Time
	scheduler.Record
}

type delivery struct {
	at  time.Time
	seq int
	to  string
	msg scheduler.Message
}

type exec struct {
	host  string
	req   scheduler.ExecRequest
	step  int
	until time.Time
	moves []scheduler.Action // in flight in the current step
	// check is the plan's re-check state (Options.Recheck): the runtime
	// executor's own verdicts (the agent's Decision.PlanCheck) on what
	// the ground truth shows; results are the actions ended, as the
	// executor reports them (node.PlanOutcome ends the plan with them).
	check   *node.PlanCheck
	results []node.ActionResult
	// then, for a plan from outside (Execute), is told its end.
	then func(scheduler.Outcome, scheduler.EndClass, string)
}

// deliveries is a min-heap of deliveries by (time, seq).
type deliveries []delivery

func (q deliveries) Len() int { return len(q) }
func (q deliveries) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q deliveries) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *deliveries) Push(x any)   { *q = append(*q, x.(delivery)) }
func (q *deliveries) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

// Cluster is a deterministic cloud of agents.
type Cluster struct {
	opt    Options
	rng    *rand.Rand
	Now    time.Time
	Agents map[string]*scheduler.Agent
	decide map[string]*agentd.Decision // by host: its agent's decision part
	// outside is the decision part of the planner outside (Execute).
	outside *agentd.Decision
	names   []string
	ring    scheduler.Ring             // shared by the agents
	Hosts   map[string]*scheduler.Host // ground truth
	Crashed map[string]bool
	Arbiter *consensus.Local
	arb     *faultyArbiter
	queue   deliveries
	seq     int
	execs   []*exec
	// due is the earliest until of execs (zero: one may be due now):
	// a step in which no plan's step ends does not walk them all.
	due     time.Time
	servers int
	// agents is Agents by names' index (index: a name's), for the ticks
	// and samples that visit every host.
	agents []*scheduler.Agent
	index  map[string]int
	// seen and owner are check's, kept between checks.
	seen, owner map[string]string
	// movedBy: servers each partition's plans moved (DESIGN §8: at most
	// once per plan; a partition's re-plans share its event's request id).
	movedBy map[string]map[string]bool

	Records    []Rec
	Moves      []Move // completed live migrations, in order
	Violations []string
	Messages   int
	// Started counts live migrations started; Shelved the servers
	// shelved off their host.
	Started, Shelved int
	// Samples counts the agents' samples of their host (one a second each).
	Samples int64
	// incoming: per destination, the live migrations in flight to it.
	incoming map[string][]scheduler.Action
	// moving: servers in a live migration (their task state).
	moving    map[string]bool
	startedAt map[string]time.Time // server -> its move's start (Move.Start)
	lastCheck time.Time
	// Rereads counts the arbiter reads agents made after an unknown
	// outcome; RereadMerges those that found the merge committed.
	Rereads, RereadMerges int
	// Filter, if set, can drop a message (returns false) — partitions, targeted loss.
	Filter func(from, to string, m scheduler.Message) bool

	// Nova counts the calls the runtime would make to Nova (nova.Client
	// method names, priced by nova/fake.WarmRequests; nova.go).
	Nova novaCalls
}

// New builds a cluster over hosts (servers with their demand).
func New(opt Options, hosts []scheduler.Host) *Cluster {
	if opt.Step == 0 {
		opt.Step = 50 * time.Millisecond
	}
	if opt.Latency == 0 {
		opt.Latency = time.Millisecond
	}
	if opt.MigrationTime == 0 {
		opt.MigrationTime = 2 * time.Second
	}
	c := &Cluster{
		opt: opt, rng: rand.New(rand.NewSource(opt.Seed)), Now: time.Unix(1_700_000_000, 0).UTC(),
		Agents: map[string]*scheduler.Agent{}, decide: map[string]*agentd.Decision{}, Hosts: map[string]*scheduler.Host{}, Crashed: map[string]bool{},
		incoming: map[string][]scheduler.Action{}, moving: map[string]bool{},
	}
	if opt.Node.Refresh == 0 {
		opt.Node = node.DefaultConfig()
		c.opt.Node = opt.Node
	}
	c.Nova.init(opt.Seed, &fake.API{Rate: opt.NovaRate, Latency: opt.NovaLatency}, func() time.Time { return c.Now })
	c.Arbiter = consensus.NewLocal(func() time.Time { return c.Now })
	c.arb = &faultyArbiter{Arbiter: c.Arbiter, rate: opt.ArbiterFaults, rng: rand.New(rand.NewSource(opt.Seed + 1))}
	for i := range hosts {
		h := hosts[i]
		h.Servers = slices.Clone(h.Servers)
		c.Hosts[h.Name] = &h
		c.names = append(c.names, h.Name)
		c.servers += len(h.Servers)
	}
	sort.Strings(c.names)
	c.agents = make([]*scheduler.Agent, len(c.names))
	c.index = make(map[string]int, len(c.names))
	for i, n := range c.names {
		c.index[n] = i
	}
	c.ring = scheduler.NewRing(c.names)
	if !opt.NoAgents {
		for _, n := range c.names {
			c.start(n)
		}
	}
	return c
}

// Execute runs a plan from a planner outside the agents (Options.NoAgents:
// the oracle) as the agents' plans run (Options.Recheck: the runtime
// executor's verdicts); then is told its end (node.PlanOutcome's; a
// re-plan it asks for ends the event Aborted: no leader re-plans).
func (c *Cluster) Execute(req scheduler.ExecRequest, then func(scheduler.Outcome, scheduler.EndClass, string)) {
	c.addExec(c.newExec("", req, then))
}

// addExec queues e; its first step starts at the next progress.
func (c *Cluster) addExec(e *exec) {
	c.execs = append(c.execs, e)
	c.due = time.Time{}
}

// config is host n's agent's configuration (Options.Agent).
func (c *Cluster) config(n string) scheduler.Config {
	cfg := c.opt.Agent
	if cfg.K == 0 {
		cfg = scheduler.DefaultConfig(n)
	}
	cfg.ID = n
	return cfg
}

func (c *Cluster) start(n string) {
	cfg := c.config(n)
	cfg.Incarnation = fmt.Sprint(c.rng.Intn(1 << 30))
	d := c.assemble(cfg, &c.ring)
	a := d.Agent()
	c.Agents[n], c.decide[n] = a, d
	if i, ok := c.index[n]; ok {
		c.agents[i] = a
	}
	delete(c.Nova.sched, n) // a new runtime: its monitor starts afresh
}

// Crash stops an agent (its messages are lost); Restart brings it back free.
func (c *Cluster) Crash(n string) { c.Crashed[n] = true }

// Restart starts a fresh agent on n.
func (c *Cluster) Restart(n string) {
	delete(c.Crashed, n)
	c.start(n)
}

// MemberDown tells every live agent that n is dead (failure detection).
func (c *Cluster) MemberDown(n string) {
	for _, m := range c.names {
		if !c.Crashed[m] {
			c.Agents[m].MemberDown(n)
			c.flush(m)
		}
	}
}

// Run advances d of virtual time.
func (c *Cluster) Run(d time.Duration) {
	end := c.Now.Add(d)
	for c.Now.Before(end) {
		c.Step()
	}
}

// RunUntil steps until cond holds or d passes; it reports whether cond held.
func (c *Cluster) RunUntil(d time.Duration, cond func() bool) bool {
	end := c.Now.Add(d)
	for c.Now.Before(end) {
		if cond() {
			return true
		}
		c.Step()
	}
	return cond()
}

// Step advances one step: deliveries, plan progress, ticks and samples.
func (c *Cluster) Step() {
	prev := c.Now
	c.Now = c.next()
	// Deliver what is due, in (time, seq) order.
	for len(c.queue) > 0 && !c.queue[0].at.After(c.Now) {
		d := heap.Pop(&c.queue).(delivery)
		if c.Crashed[d.to] {
			continue
		}
		c.Agents[d.to].Step(d.msg)
		c.flush(d.to)
	}
	c.progress()
	tick := crossed(prev, c.Now, 500*time.Millisecond)
	sample := crossed(prev, c.Now, time.Second)
	if sample && c.opt.BeforeSample != nil {
		c.opt.BeforeSample(c.Now)
	}
	if (tick || sample) && !c.opt.NoAgents {
		for i, n := range c.names {
			if c.Crashed[n] {
				continue
			}
			a := c.agents[i]
			if sample {
				c.refresh(n)
				a.Observe(c.Now, c.sample(n))
				c.Samples++
			}
			if tick {
				a.Tick(c.Now)
			}
			c.flush(n)
		}
	}
	if !c.opt.NoAgents && crossed(prev, c.Now, c.opt.Node.ServiceWatch) {
		c.watch()
	}
	if c.opt.CheckEvery <= 0 || c.Now.Sub(c.lastCheck) >= c.opt.CheckEvery {
		c.lastCheck = c.Now
		c.check()
	}
}

// next is the virtual time of the next step: Now + Step, or with
// EventDriven the earliest of the next delivery, the next end of a plan's
// step and the agents' next tick (every 500 ms).
func (c *Cluster) next() time.Time {
	if !c.opt.EventDriven {
		return c.Now.Add(c.opt.Step)
	}
	const tick = int64(500 * time.Millisecond)
	at := time.Unix(0, (c.Now.UnixNano()/tick+1)*tick).UTC()
	if len(c.queue) > 0 && c.queue[0].at.Before(at) {
		at = c.queue[0].at
	}
	if len(c.execs) > 0 && c.due.Before(at) {
		at = c.due
	}
	if !at.After(c.Now) {
		at = c.Now.Add(time.Nanosecond)
	}
	return at
}

// Check runs the whole-cloud safety check now (with CheckEvery, at the
// Migrating is the number of moves in flight in the plans being executed
// (for the simulator's chart).
func (c *Cluster) Migrating() int {
	n := 0
	for _, e := range c.execs {
		n += len(e.moves)
	}
	return n
}

// end of a run).
func (c *Cluster) Check() { c.lastCheck = c.Now; c.check() }

func crossed(prev, now time.Time, every time.Duration) bool {
	return prev.UnixNano()/int64(every) != now.UnixNano()/int64(every)
}

// View is host n as its monitor would sample it now (a copy).
func (c *Cluster) View(n string) scheduler.Host { return c.snapshot(n) }

// snapshot is host n as its monitor sees it (servers in flight stay on
// their source until the move ends, as in Nova).
func (c *Cluster) snapshot(n string) scheduler.Host {
	h := c.sample(n)
	h.Servers = slices.Clone(h.Servers)
	return h
}

// sample is snapshot sharing the ground truth's servers, for an agent's
// Observe, which copies them before it keeps or marks them.
func (c *Cluster) sample(n string) scheduler.Host {
	h := *c.Hosts[n]
	h.UsedVCPUs, h.UsedRAMMB = 0, 0
	for _, s := range h.Servers {
		h.UsedVCPUs += float64(s.VCPUs)
		h.UsedRAMMB += float64(s.RAMMB)
	}
	for _, m := range c.incoming[n] {
		h.UsedVCPUs += float64(m.VCPUs)
		h.UsedRAMMB += float64(m.RAMMB)
	}
	return h
}

func (c *Cluster) flush(n string) {
	rd := c.Agents[n].Ready()
	defer c.notePartition(n)
	for _, env := range rd.Messages {
		c.Messages++
		if c.Filter != nil && !c.Filter(n, env.To, env.Msg) {
			continue
		}
		if c.rng.Float64() < c.opt.Drop {
			continue
		}
		copies := 1
		if c.rng.Float64() < c.opt.Dup {
			copies = 2
		}
		for k := 0; k < copies; k++ {
			lat := c.opt.Latency
			if c.opt.Jitter > 0 {
				lat += time.Duration(c.rng.Int63n(int64(c.opt.Jitter)))
			}
			if c.opt.Delay != nil {
				lat += c.opt.Delay(n, env.To)
			}
			// Round-trip through the wire encoding, as on the bus.
			data, err := scheduler.Encode(env.Msg)
			if err != nil {
				c.Violations = append(c.Violations, "encode: "+err.Error())
				continue
			}
			m, err := scheduler.Decode(data)
			if err != nil {
				c.Violations = append(c.Violations, "decode: "+err.Error())
				continue
			}
			c.seq++
			heap.Push(&c.queue, delivery{at: c.Now.Add(lat), seq: c.seq, to: env.To, msg: m})
		}
	}
	for _, req := range rd.Solve {
		if c.opt.OnSolveRequest != nil {
			c.opt.OnSolveRequest(req)
		}
		opt := scheduler.DefaultSolveOptions()
		opt.Rand = rand.New(rand.NewSource(c.rng.Int63()))
		if c.opt.MigrationDuration != nil && (req.Problem.MoveCost > 0 || req.Problem.MoveCostPerSecond > 0) {
			opt.Migrations = durationModel(c.opt.MigrationDuration) // the move cost's
		}
		t0 := time.Now()
		sol, plan, err := scheduler.SolveAndPlan(req.Problem, req.Limits, opt)
		if c.opt.OnSolve != nil {
			c.opt.OnSolve(time.Since(t0))
		}
		c.Agents[n].SolveDone(req.PartID, req.Version, sol, plan, err)
		c.flush(n)
	}
	for _, req := range rd.Execute {
		c.addExec(c.newExec(n, req, nil))
	}
	for _, req := range rd.Arbiter {
		res := c.arbiter(req)
		if c.Crashed[n] {
			continue
		}
		c.Agents[n].ArbiterDone(req, res)
		c.checkMergeApplied(n, req, res)
		c.flush(n)
	}
	for _, r := range rd.Records {
		if c.opt.OnRecord != nil {
			c.opt.OnRecord(Rec{Host: n, At: c.Now, Record: r})
			continue
		}
		c.Records = append(c.Records, Rec{Host: n, At: c.Now, Record: r})
	}
}

func (c *Cluster) arbiter(req scheduler.ArbiterRequest) scheduler.ArbiterResult {
	res := node.CallArbiter(context.Background(), c.arb, req)
	if req.Op == scheduler.ArbRead {
		c.Rereads++
		if mergeSeen(req, res) {
			c.RereadMerges++
		}
	}
	return res
}

// mergeSeen reports whether the arbiter's answer shows the merge of req
// committed: a Merge committed, or a re-read finding the absorbed
// partition's nodes in the absorbing one.
func mergeSeen(req scheduler.ArbiterRequest, res scheduler.ArbiterResult) bool {
	switch req.Op {
	case scheduler.ArbMerge:
		return res.Committed
	case scheduler.ArbRead:
		return res.Committed && req.Absorb != nil && slices.Contains(res.Nodes, req.Absorb.Nodes[0])
	}
	return false
}

// checkMergeApplied: a merge the arbiter committed is applied by the
// absorbing leader at once (else the absorbed partition and its events
// are orphaned: absorbed in the arbiter, carried by no one).
func (c *Cluster) checkMergeApplied(n string, req scheduler.ArbiterRequest, res scheduler.ArbiterResult) {
	if !mergeSeen(req, res) {
		return
	}
	p := c.Agents[n].Partition()
	if p == nil || p.ID != req.Part.ID || !slices.Contains(p.Nodes, req.Absorb.Nodes[0]) {
		c.Violations = append(c.Violations, fmt.Sprintf("%s: merge of %s into %s committed but not applied (partition now %+v)", n, req.Absorb.ID, req.Part.ID, p))
	}
}

func (c *Cluster) newExec(host string, req scheduler.ExecRequest, then func(scheduler.Outcome, scheduler.EndClass, string)) *exec {
	return &exec{host: host, req: req, step: -1, then: then, check: c.decider(host).PlanCheck(req.Event, req.Plan)}
}

// assemble builds an agent's decision part as every agent of the fleet
// is built (agentd.NewDecision) from cfg and the cluster's runtime
// configuration; ring nil: the agent alone.
func (c *Cluster) assemble(cfg scheduler.Config, ring *scheduler.Ring) *agentd.Decision {
	d, err := agentd.NewDecision(agentd.Options{Runtime: c.opt.Node, Agent: cfg, Ring: ring})
	if err != nil {
		panic(fmt.Sprintf("detsim: %v", err)) // the options are the caller's own
	}
	return d
}

// decider is host's agent's decision part ("": the planner outside's,
// configured as the agents are, with the cluster's thresholds).
func (c *Cluster) decider(host string) *agentd.Decision {
	if d, ok := c.decide[host]; ok {
		return d
	}
	if c.outside == nil {
		cfg := c.config("planner")
		cfg.Incarnation, cfg.Thresholds = "planner", c.thresholds()
		c.outside = c.assemble(cfg, nil)
	}
	return c.outside
}

// progress moves plans forward: a step's moves start together (counted
// on both ends) and end MigrationTime later.
func (c *Cluster) progress() {
	if len(c.execs) == 0 || c.Now.Before(c.due) {
		return // no plan's step ends now
	}
	keep := c.execs[:0]
	for _, e := range c.execs {
		if c.Now.Before(e.until) {
			keep = append(keep, e)
			continue
		}
		for _, m := range e.moves { // finish the current step
			r := node.ActionResult{Action: m, Outcome: node.ActionDone, Class: node.ReasonNone}
			if !c.finish(m) {
				r.Outcome, r.Class, r.Reason = node.ActionFailed, node.ReasonFailed, "server vanished in flight"
			} else if e.then == nil {
				c.movedOnce(e.req.PartID, m.Server)
			}
			e.results = append(e.results, r)
		}
		e.moves = nil
		e.step++
		if e.step >= len(e.req.Plan.Steps) && e.then != nil {
			o, class, reason, replan := c.outcome(e)
			if replan { // no leader to re-plan: the oracle's event ends
				o = scheduler.Aborted
			}
			e.then(o, class, reason)
			continue
		}
		if e.step >= len(e.req.Plan.Steps) || c.Crashed[e.host] {
			if !c.Crashed[e.host] {
				c.planDone(e)
				c.flush(e.host)
			}
			continue
		}
		// The step ends with its longest action: its re-check's reads,
		// its request, the migration, and the poll that sees it end
		// (each request as long as Nova's API takes, nova.go).
		d, other := time.Duration(0), time.Duration(0)
		for _, a := range e.req.Plan.Steps[e.step] {
			how, took := c.begin(e, a)
			switch how {
			case skipped:
				other = max(other, took)
				continue
			case shelved:
				other = max(other, took)
				e.results = append(e.results, node.ActionResult{Action: a, Outcome: node.ActionDone, Class: node.ReasonNone})
				continue
			}
			e.moves = append(e.moves, a)
			c.incoming[a.To] = append(c.incoming[a.To], a)
			c.moving[a.Server] = true
			mt := c.migrationTime(a)
			start, seen := c.Nova.migrate(mt, c.opt.Node.Exec.Poll)
			d = max(d, took+start+mt+seen)
		}
		if d == 0 {
			d = c.opt.MigrationTime
		}
		d = max(d, other)
		e.until = c.Now.Add(d)
		keep = append(keep, e)
	}
	c.execs = keep
	c.due = time.Time{}
	for i, e := range keep {
		if i == 0 || e.until.Before(c.due) {
			c.due = e.until
		}
	}
}

// outcome is the end of a plan as the runtime's runner decides it: the
// same function (node.PlanOutcome) on the executor's results, the
// event's host's own measurement read from the ground truth.
func (c *Cluster) outcome(e *exec) (scheduler.Outcome, scheduler.EndClass, string, bool) {
	res := node.ExecResult{Actions: e.results}
	for _, r := range e.results {
		switch r.Outcome {
		case node.ActionDone:
			res.Done++
		case node.ActionSkipped:
			res.Skipped++
		default:
			res.Failed++
		}
	}
	ev, thr := e.req.Event, c.decider(e.host).Config().Thresholds
	return node.PlanOutcome(res, e.req.Moved > 0, true, func() bool {
		return node.RelievedBy(thr, ev, e.req.Plan, c.demand(ev.Host))
	})
}

// planDone ends an agent's plan as the runtime's runner does: a re-plan
// (PlanSkipped) or its end (PlanDone), as node.PlanOutcome says.
func (c *Cluster) planDone(e *exec) {
	a := c.Agents[e.host]
	o, class, reason, replan := c.outcome(e)
	if replan {
		var did []scheduler.Action
		for _, r := range e.results {
			if r.Outcome == node.ActionDone {
				did = append(did, r.Action)
			}
		}
		a.PlanSkipped(e.req.PartID, e.req.Version, did, class, reason)
		return
	}
	a.PlanDone(e.req.PartID, e.req.Version, o, class, reason)
}

// movedOnce records that partition part moved server, a violation if
// it had already.
func (c *Cluster) movedOnce(part, server string) {
	if c.movedBy == nil {
		c.movedBy = map[string]map[string]bool{}
	}
	if c.movedBy[part] == nil {
		c.movedBy[part] = map[string]bool{}
	}
	if c.movedBy[part][server] {
		c.Violations = append(c.Violations, fmt.Sprintf("server %s moved twice by partition %s", server, part))
	}
	c.movedBy[part][server] = true
}

// migrationTime is how long a live migration of a takes.
func (c *Cluster) migrationTime(a scheduler.Action) time.Duration {
	if c.opt.MigrationDuration != nil {
		return c.opt.MigrationDuration(a)
	}
	return c.opt.MigrationTime
}

func (c *Cluster) find(host, id string) int {
	return slices.IndexFunc(c.Hosts[host].Servers, func(s scheduler.Server) bool { return s.ID == id })
}

// started is what begin did with an action.
type started int

const (
	migrating started = iota // a live migration in flight
	shelved                  // done at once: the server left its host
	skipped                  // not started (Recheck), or a violation recorded
)

// begin starts one action. With Options.Recheck the runtime executor's
// re-check decides on what the ground truth shows (node.PlanCheck), and
// a skipped action is recorded in e.results. Then, or without Recheck,
// the observer checks the destination (counting servers in flight to
// it) and records a violation when the move overloads it. took is how
// long its requests took to answer (the re-check's reads; a shelve's
// requests too).
func (c *Cluster) begin(e *exec, a scheduler.Action) (how started, took time.Duration) {
	ev := e.req.Event
	i := c.find(a.From, a.Server)
	if c.opt.Recheck {
		v := e.check.Judge(a, c.observe(e, a, i))
		took = c.Nova.reads(c.caller(e), v.Reads)
		if v.Class != "" {
			e.results = append(e.results, node.ActionResult{Action: a, Outcome: node.ActionSkipped, Class: v.Class, Reason: v.Reason})
			return skipped, took
		}
	}
	if i < 0 {
		c.Violations = append(c.Violations, fmt.Sprintf("%s: server %s not on %s", ev.ID, a.Server, a.From))
		e.results = append(e.results, node.ActionResult{Action: a, Outcome: node.ActionSkipped, Class: node.ReasonServerChanged, Reason: "server not on its source"})
		return skipped, took
	}
	src := c.Hosts[a.From]
	if a.Kind != scheduler.LiveMigrate {
		src.Servers = slices.Delete(src.Servers, i, i+1) // shelved: leaves the host
		c.servers--
		c.Shelved++
		return shelved, took + c.Nova.shelve()
	}
	// The snapshot counts the allocation of servers moving in; their
	// demand is counted here, on top of the servers on the host.
	snap := c.snapshot(a.To)
	var inflight fit.Use
	for _, m := range c.incoming[a.To] {
		inflight.CPU += m.CPU
		inflight.RAM += m.RAM
	}
	s := src.Servers[i]
	if !c.thresholds().Fits(&snap, inflight, &s) || c.Hosts[a.To].Disabled || c.Hosts[a.To].Draining {
		c.Violations = append(c.Violations, fmt.Sprintf("%s: moving %s to %s overloads it", ev.ID, a.Server, a.To))
	}
	c.Started++
	if c.startedAt == nil {
		c.startedAt = map[string]time.Time{}
	}
	c.startedAt[a.Server] = c.Now
	return migrating, took
}

// observe is what the executor's re-check of a would read (i: the
// server's index on its source, -1 when it is not there): the ground
// truth as Nova lists it, each host's demand as its agent measures it.
func (c *Cluster) observe(e *exec, a scheduler.Action, i int) node.Observed {
	o := node.Observed{Server: nova.Server{ID: a.Server, Name: a.Server}}
	if i >= 0 {
		o.Server = c.novaServer(c.Hosts[a.From].Servers[i], a.From)
	}
	if ev := e.req.Event; !e.check.EventKnown() {
		o.Event, o.EventServers = c.novaHost(ev.Host)
		o.EventDemand = c.demand(ev.Host)
	}
	if a.Kind == scheduler.LiveMigrate {
		o.Dest, o.DestServers = c.novaHost(a.To)
		o.SrcDemand, o.DestDemand = c.demand(a.From), c.demand(a.To)
	}
	if !e.check.ConsentKnown(a.From) {
		o.Source, _ = c.novaHost(a.From)
		o.SrcDemand = c.demand(a.From)
	}
	return o
}

// novaHost is host n and its servers as Nova lists them: placement
// holds a migrating server on both ends.
func (c *Cluster) novaHost(n string) (nova.Host, []nova.Server) {
	h := c.Hosts[n]
	out := nova.Host{Name: n, VCPUs: int(h.CPUs), RAMMB: int(h.RAMMB),
		CPUAllocRatio: ratio(h.AllocVCPUs, h.CPUs), RAMAllocRatio: ratio(h.AllocRAMMB, h.RAMMB)}
	servers := make([]nova.Server, len(h.Servers))
	for k, s := range h.Servers {
		servers[k] = c.novaServer(s, n)
		out.VCPUsUsed += s.VCPUs
		out.RAMMBUsed += s.RAMMB
	}
	for _, m := range c.incoming[n] {
		out.VCPUsUsed += m.VCPUs
		out.RAMMBUsed += m.RAMMB
	}
	if h.Disabled || h.Draining {
		out.Service.Status = nova.ServiceDisabled
	}
	if h.Draining {
		out.Service.DisabledReason = "dvms:maintenance"
	}
	return out, servers
}

func ratio(alloc, total float64) float64 {
	if alloc <= 0 || total <= 0 {
		return 1
	}
	return alloc / total
}

// novaServer is s on host as Nova shows it (migrating while in flight).
func (c *Cluster) novaServer(s scheduler.Server, host string) nova.Server {
	out := nova.Server{ID: s.ID, Name: s.ID, Host: host, Status: nova.StatusActive, VCPUs: s.VCPUs, RAMMB: s.RAMMB}
	if c.moving[s.ID] {
		out.TaskState = "migrating"
	}
	if s.Group != "" {
		out.Group = &nova.ServerGroup{ID: s.Group, Name: s.Group, Policy: s.Policy}
	}
	return out
}

// demand is host n's servers' demand as its agent measures it (nil: no
// such host).
func (c *Cluster) demand(n string) map[string]nova.Demand {
	h := c.Hosts[n]
	if h == nil {
		return nil
	}
	d := make(map[string]nova.Demand, len(h.Servers))
	for _, s := range h.Servers {
		d[s.ID] = nova.Demand{CPU: s.CPU, RAMMB: s.RAM}
	}
	return d
}

// finish completes a move (false: its server vanished).
func (c *Cluster) finish(a scheduler.Action) bool {
	delete(c.moving, a.Server)
	start := c.startedAt[a.Server]
	delete(c.startedAt, a.Server)
	in := c.incoming[a.To]
	if k := slices.IndexFunc(in, func(m scheduler.Action) bool { return m.Server == a.Server && m.From == a.From }); k >= 0 {
		in = slices.Delete(in, k, k+1)
	}
	if len(in) == 0 {
		delete(c.incoming, a.To)
	} else {
		c.incoming[a.To] = in
	}
	i := c.find(a.From, a.Server)
	if i < 0 {
		c.Violations = append(c.Violations, fmt.Sprintf("server vanished in flight: %s (%s to %s)", a.Server, a.From, a.To))
		return false
	}
	s := c.Hosts[a.From].Servers[i]
	c.Hosts[a.From].Servers = slices.Delete(c.Hosts[a.From].Servers, i, i+1)
	c.Hosts[a.To].Servers = append(c.Hosts[a.To].Servers, s)
	c.Moves = append(c.Moves, Move{At: c.Now, Start: start, Server: a.Server, From: a.From, To: a.To})
	return true
}

// Move is a live migration that completed.
type Move struct {
	At               time.Time
	Start            time.Time // when it started
	Server, From, To string
}

// check verifies DESIGN §8 on the whole cluster.
func (c *Cluster) check() {
	if c.seen == nil {
		c.seen, c.owner = make(map[string]string, c.servers), map[string]string{}
	}
	seen, owner := c.seen, c.owner
	clear(seen)
	clear(owner)
	n := 0
	for _, h := range c.names {
		for _, s := range c.Hosts[h].Servers {
			if prev, dup := seen[s.ID]; dup {
				c.Violations = append(c.Violations, fmt.Sprintf("server %s on %s and %s", s.ID, prev, h))
			}
			seen[s.ID] = h
			n++
		}
	}
	if n != c.servers {
		c.Violations = append(c.Violations, fmt.Sprintf("servers: %d, want %d", n, c.servers))
		c.servers = n
	}
	// Partitions executing plans never share a node.
	for _, name := range c.names {
		if c.Crashed[name] || c.opt.NoAgents {
			continue
		}
		p := c.Agents[name].Partition()
		if p == nil || p.Leader != name || p.State != scheduler.Finishing {
			continue
		}
		for _, node := range p.Nodes {
			if o, ok := owner[node]; ok && o != p.ID {
				c.Violations = append(c.Violations, fmt.Sprintf("node %s in executing partitions %s and %s", node, o, p.ID))
			}
			owner[node] = p.ID
		}
	}
}

// thresholds are the agents' thresholds (DESIGN's defaults when unset).
func (c *Cluster) thresholds() scheduler.Thresholds {
	if c.opt.Agent.Thresholds.CPUOverload == 0 {
		return scheduler.DefaultThresholds()
	}
	return c.opt.Agent.Thresholds
}

// ArbiterFaults returns how many arbiter requests failed with an unknown
// outcome (applied, answer lost) and with no quorum (not applied).
func (c *Cluster) ArbiterFaults() (unknown, noQuorum int) { return c.arb.Unknown, c.arb.NoQuorum }

// Count returns how many records of kind were emitted (with outcome o when o != 0).
func (c *Cluster) Count(kind scheduler.RecordKind, o scheduler.Outcome) int {
	n := 0
	for _, r := range c.Records {
		if r.Kind == kind && (o == 0 || r.Outcome == o) {
			n++
		}
	}
	return n
}

// Overloaded lists overloaded hosts of the ground truth.
func (c *Cluster) Overloaded() []string {
	thr := c.thresholds()
	var out []string
	for _, n := range c.names {
		if thr.Overloaded(c.Hosts[n]) {
			out = append(out, n)
		}
	}
	return out
}

// Idle reports whether no partition exists and nothing is in flight.
func (c *Cluster) Idle() bool {
	if len(c.execs) > 0 {
		return false
	}
	for _, n := range c.names {
		if !c.Crashed[n] && !c.opt.NoAgents && c.Agents[n].Partition() != nil {
			return false
		}
	}
	return true
}

// Snapshot returns the ground truth as the solver sees it.
func (c *Cluster) Snapshot() []scheduler.Host {
	out := make([]scheduler.Host, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.snapshot(n))
	}
	return out
}

// Solvable lists overloaded hosts for which the solver, run on the whole
// cloud, finds a solution: events that a correct protocol must solve.
func (c *Cluster) Solvable() []string {
	thr := c.thresholds()
	all := c.Snapshot()
	var out []string
	for _, n := range c.Overloaded() {
		sol := scheduler.Solve(scheduler.Problem{Events: []scheduler.Event{{Kind: scheduler.Overload, Host: n}}, Hosts: all, Thresholds: thr}, scheduler.DefaultSolveOptions())
		if sol.OK {
			out = append(out, n)
		}
	}
	return out
}

// durationModel is Options.MigrationDuration as the solver's migration
// model: every move converges.
type durationModel func(scheduler.Action) time.Duration

func (d durationModel) Migration(a scheduler.Action) (time.Duration, bool) { return d(a), true }
