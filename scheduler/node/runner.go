package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/migest"
	"github.com/dvms-project/dvms/scheduler/oscillation"
)

// Config configures the runtime around one agent.
type Config struct {
	Region string
	// Tick is the agent's tick (timeouts are checked at this period).
	Tick time.Duration
	// Monitor is the sampling interval of the host: demand from the local
	// source against the cached view of the host (no Nova request).
	Monitor time.Duration
	// Refresh is how often the cached view of the host's servers is
	// re-read from Nova (one request, ±10 %); it is also re-read at once
	// after a partition this agent was in ends. Its cost at rest is one request per agent per
	// Refresh: 10,000 agents at 60 s send 167 requests/s.
	Refresh time.Duration
	// PlacementRefresh is how often service, capacity and usage are
	// re-read from Nova and placement at rest (three requests, ±10 %).
	PlacementRefresh time.Duration
	// ServiceWatch is the period of the region's maintenance watch: one
	// agent of the region lists the nova-compute services and publishes
	// changes over NATS.
	ServiceWatch time.Duration
	// DrainReason: a disabled nova-compute service whose reason matches
	// is being drained (MAINTENANCE).
	DrainReason *regexp.Regexp
	// Inbox is the number of received messages buffered; beyond it
	// messages are dropped (counted and logged).
	Inbox int
	// StopGrace bounds how long a stopping agent finishes the plan it is
	// executing (see Run).
	StopGrace time.Duration
	Exec      ExecConfig
	// Estimate tunes the migration estimator the leader's solver reads
	// (scheduler/migest), fed by this agent's executor.
	Estimate migest.Config
	// Bounds bound what one key may do to this agent (bounds.go).
	Bounds BoundsConfig
	// Oscillation: when the agent reports a host or a server going back
	// and forth (scheduler/oscillation; observed only, nothing decided on it).
	Oscillation oscillation.Config
	// StateDir, if set, is where the agent keeps the grants it gave for
	// moves off its host (GrantsFile), so that after a restart it waits
	// for those still running in Nova before its host takes part in
	// another plan (grants_file.go). Empty: kept in memory only.
	StateDir string
}

// DefaultConfig returns DESIGN's defaults.
func DefaultConfig() Config {
	return Config{
		Region: "RegionOne", Tick: 500 * time.Millisecond, Monitor: time.Second,
		Refresh: time.Minute, PlacementRefresh: 10 * time.Minute, ServiceWatch: 2 * time.Second,
		DrainReason: regexp.MustCompile(`^dvms:maintenance|^maintenance`), Inbox: 4096, StopGrace: 2 * time.Minute,
		Exec: DefaultExecConfig(), Estimate: migest.DefaultConfig(), Bounds: DefaultBoundsConfig(),
		Oscillation: oscillation.DefaultConfig(),
	}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.Region == "" {
		errs = append(errs, errors.New("region is required"))
	}
	if c.Tick <= 0 || c.Monitor <= 0 {
		errs = append(errs, errors.New("tick and monitor_interval must be > 0"))
	}
	if c.Refresh < c.Monitor || c.PlacementRefresh < c.Refresh {
		errs = append(errs, fmt.Errorf("need monitor interval (%s) <= refresh_interval (%s) <= placement_refresh_interval (%s)", c.Monitor, c.Refresh, c.PlacementRefresh))
	}
	if c.ServiceWatch <= 0 {
		errs = append(errs, errors.New("service_watch_interval must be > 0"))
	}
	if c.DrainReason == nil {
		errs = append(errs, errors.New("drain_reason_pattern is required"))
	}
	if c.Inbox < 1 {
		errs = append(errs, errors.New("inbox must be >= 1"))
	}
	if c.StopGrace < 0 {
		errs = append(errs, errors.New("stop_grace must be >= 0"))
	}
	if err := c.Exec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Estimate.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Bounds.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Oscillation.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Hooks let a harness observe the runtime (metrics, simulation). They are
// called from the runtime's goroutines and must be cheap and thread-safe.
type Hooks struct {
	OnRecord func(host string, r scheduler.Record)
	OnSend   func(host string, m scheduler.Message)
	OnExec   func(host string, ev scheduler.Event, r ExecResult)
	OnSolve  func(host string, req scheduler.SolveRequest, sol scheduler.Solution, took time.Duration)
	// OnCompletion: the executor's completion policy sent force_complete
	// or abort for a migration that did not converge (what), with what
	// Nova said (result: node.Completion*).
	OnCompletion func(host, what, result string)
	// OnPlanExec: a plan was executed (after OnExec), with the request
	// (the plan itself): the agent keeps advised plans for approval.
	OnPlanExec func(host string, req scheduler.ExecRequest, res ExecResult)
	// OnAdopt: this agent gave up on the leader of a partition whose
	// moves it had granted, and followed them in Nova to their end
	// (adopt.go): res holds each with its true outcome and grant id.
	OnAdopt func(host string, ev scheduler.Event, res ExecResult)
}

// Deps are the runtime's collaborators.
type Deps struct {
	Bus     bus.Transport
	Nova    nova.Client
	Demand  nova.DemandSource
	Arbiter consensus.Arbiter
	Clock   Clock
	Log     zerolog.Logger
	Hooks   Hooks
	// Seed for the solver's randomized restarts.
	Seed int64
	// Watcher, if set, says whether this agent is the region's
	// maintenance watch now (see watch.go); nil: never.
	Watcher func() bool
	// Controls, if set, are the operator's run-time controls the
	// executor reads (Executor.Controls); the agent learns them through
	// Runner.Control.
	Controls Controls
	// Ring, if set, is the initial member list shared with the other
	// runners of the process (dvms simulate: one list, not one per
	// agent); New's members must then be nil.
	Ring *scheduler.Ring
	// Agent, if set, is the agent's state machine, built by the caller
	// from ac (agentd.NewDecision); New's members and Ring are then not
	// used. Nil: New builds it.
	Agent *scheduler.Agent
}

// Runner owns one agent and its goroutines.
type Runner struct {
	cfg   Config
	agent *scheduler.Agent
	d     Deps
	exec  *Executor
	est   *migest.Estimator // fed by exec, read by the solver
	log   zerolog.Logger
	rng   *rand.Rand

	inbox   inbox
	samples chan scheduler.Host
	results chan func(*scheduler.Agent)
	arb     *arbiterQueue     // arbiter requests in order (startArbiter)
	svc     chan nova.Service // this host's service, as the watch reports it
	refresh chan struct{}     // asks the monitor for a full re-read
	// partRefresh asks it to re-read the servers (the agent left a
	// partition).
	partRefresh chan struct{}
	inPart      bool // as of the last flush (agent goroutine only)
	wg          sync.WaitGroup

	lastMu     sync.Mutex
	last       scheduler.Host
	hasLast    bool
	lastWhen   time.Time
	lastDemand map[string]nova.Demand
	q          queries
	moves      planMoves // of the plan being executed, for summaries (summary.go)
	fence      ledger    // grants given to leaders (adopt.go)

	done    chan struct{} // closed when Run returns
	dropped atomic.Int64
	bounds  *bounds // on each key (bounds.go)
	// state is a copy of the agent's partition for Status (read by other
	// goroutines).
	mu    sync.Mutex
	state *scheduler.Partition
}

// New returns a runner for agent configuration ac over members.
func New(cfg Config, ac scheduler.Config, members []string, d Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	if d.Bus == nil || d.Nova == nil || d.Arbiter == nil || d.Clock == nil {
		return nil, errors.New("node: bus, nova, arbiter and clock are required")
	}
	a := d.Agent
	if a == nil {
		ring := scheduler.NewRing(members)
		if d.Ring != nil {
			if members != nil {
				return nil, errors.New("node: members and a shared ring given")
			}
			ring = *d.Ring
		}
		var err error
		if a, err = scheduler.NewAgentOnRing(ac, ring); err != nil {
			return nil, err
		}
	} else if a.ID() != ac.ID {
		return nil, fmt.Errorf("node: agent %s given for host %s", a.ID(), ac.ID)
	}
	log := d.Log.With().Str("host", ac.ID).Logger()
	r := &Runner{
		cfg: cfg, agent: a, d: d, log: log, rng: rand.New(rand.NewSource(d.Seed)),
		exec:        NewExecutor(cfg.Exec, d.Nova, d.Demand, ac.Thresholds, d.Clock, log),
		inbox:       inbox{max: cfg.Inbox, wake: make(chan struct{}, 1)},
		samples:     make(chan scheduler.Host, 1),
		svc:         make(chan nova.Service, 1),
		refresh:     make(chan struct{}, 1),
		partRefresh: make(chan struct{}, 1),
		results:     make(chan func(*scheduler.Agent), 64),
		done:        make(chan struct{}),
	}
	r.q.waiting = map[string]chan demandAnswer{}
	r.bounds = newBounds(cfg.Bounds, ac.ID, log)
	r.fence.host = ac.ID
	if cfg.StateDir != "" {
		r.fence.file = GrantsFile(cfg.StateDir, ac.ID)
	}
	r.exec.Ask = r.askDemand
	r.exec.DrainReason = cfg.DrainReason
	r.exec.Controls = d.Controls
	r.est = migest.New(cfg.Estimate)
	r.exec.Estimator = r.est
	if h := d.Hooks.OnCompletion; h != nil {
		r.exec.OnCompletion = func(what, result string) { h(ac.ID, what, result) }
	}
	r.exec.OnShelved = func(string) {
		// Best effort: revivers also look on their own, only later.
		_ = d.Bus.Publish(context.Background(), bus.ShelvedSubject(cfg.Region), []byte(ac.ID))
	}
	return r, nil
}

// Host is the agent's host.
func (r *Runner) Host() string { return r.agent.ID() }

// Partition returns the agent's partition as of its last step, or nil.
func (r *Runner) Partition() *scheduler.Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Dropped is the number of received messages dropped (malformed or inbox full).
func (r *Runner) Dropped() int64 { return r.dropped.Load() }

// Run drives the agent until ctx is done, then stops gracefully: the
// agent retires (raises no event, joins no partition, dissolves a
// partition it leads), and a plan being executed is finished, for at most
// StopGrace, before Run returns; the partition then ends as usual, its
// members told. Past StopGrace the plan is abandoned between actions:
// actions already sent to Nova are followed by Nova itself and stay in its
// migration list under the event's request id. Run waits for every
// goroutine it started.
func (r *Runner) Run(ctx context.Context) error {
	restored, err := r.restoreGrants()
	if err != nil {
		return err
	}
	subj := bus.AgentSubject(r.cfg.Region, r.agent.ID())
	sub, err := bus.SubscribeFrom(r.d.Bus, subj, r.receive)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subj, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ssubj := bus.ServiceSubject(r.cfg.Region, r.agent.ID())
	ssub, err := r.d.Bus.Subscribe(ssubj, r.receiveService)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", ssubj, err)
	}
	defer func() { _ = ssub.Unsubscribe() }()
	for subj, h := range map[string]bus.FromHandler{
		bus.DemandSubject(r.cfg.Region, r.agent.ID()): r.answerDemand,
		bus.ReplySubject(r.cfg.Region, r.agent.ID()):  r.receiveAnswer,
	} {
		s, err := bus.SubscribeFrom(r.d.Bus, subj, h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		defer func() { _ = s.Unsubscribe() }()
	}

	// The runner's goroutines outlive ctx by the stop grace period.
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer close(r.done)
	defer r.wg.Wait()
	defer cancel()

	if len(restored) > 0 {
		r.adoptHeld(run, restored.parts(), restored)
	}
	mon, stopMonitor := context.WithCancel(run)
	defer stopMonitor()
	r.wg.Add(1)
	go r.monitor(mon)
	if r.d.Watcher != nil {
		r.wg.Add(1)
		go r.watch(mon)
	}
	tick := r.d.Clock.NewTicker(r.cfg.Tick)
	defer tick.Stop()
	stop := ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case <-stop:
			stop = nil
			stopMonitor()
			busy := r.agent.Retire(r.d.Clock.Now())
			r.flush(run)
			if !busy {
				r.log.Info().Msg("stopped: no plan running")
				return nil
			}
			r.log.Info().Dur("grace", r.cfg.StopGrace).Msg("stopping: waiting for the partition to end (plan running or led by another agent)")
			grace = r.d.Clock.After(r.cfg.StopGrace)
			continue
		case <-grace:
			r.log.Warn().Dur("grace", r.cfg.StopGrace).Msg("stopped with a plan running: abandoned between actions (Nova's migration list has what was sent)")
			return nil
		case <-tick.C:
			now := r.d.Clock.Now()
			r.agent.Tick(now)
			r.applyBounds(now)
		case <-r.inbox.wake:
			for _, m := range r.inbox.take() {
				r.agent.Step(m)
			}
		case h := <-r.samples:
			r.agent.Observe(r.d.Clock.Now(), h)
		case f := <-r.results:
			f(r.agent)
		}
		r.flush(run)
		if stop == nil && r.agent.Partition() == nil {
			r.log.Info().Msg("stopped: partition ended")
			return nil
		}
	}
}

// MemberDown tells the agent that a member died (from failure detection).
// It never blocks on a stopped runner.
func (r *Runner) MemberDown(id string) {
	r.bounds.member(id, false)
	r.control(func(a *scheduler.Agent) { a.MemberDown(id) })
}

// MemberUp tells the agent that a member (re)joined; a key refused by
// the bounds stays out of the ring until its refusal ends.
func (r *Runner) MemberUp(id string) {
	r.bounds.member(id, true)
	if r.bounds.refused(r.d.Clock.Now(), id) {
		return
	}
	r.control(func(a *scheduler.Agent) { a.MemberUp(id) })
}

// Control tells the agent the operator's controls for its host (see
// scheduler.Agent.Control). It never blocks on a stopped runner.
func (r *Runner) Control(paused, excluded bool) {
	r.control(func(a *scheduler.Agent) { a.Control(paused, excluded) })
}

func (r *Runner) control(f func(*scheduler.Agent)) {
	select {
	case r.results <- f:
	case <-r.done:
	}
}

// receive is the bus handler: decode and queue, never block. from is the
// sender the bus authenticated ("" on an unsigned bus): a message must
// name it as its sender.
func (r *Runner) receive(_, from string, data []byte) {
	m, err := scheduler.Decode(data)
	if err != nil {
		r.dropped.Add(1)
		r.log.Warn().Err(err).Int("bytes", len(data)).Msg("malformed message rejected")
		return
	}
	if from != "" && m.From != from {
		r.dropped.Add(1)
		r.log.Warn().Str("from", m.From).Str("signer", from).Str("type", m.Type.String()).Msg("message rejected: sender is not its signer")
		return
	}
	if !r.bounds.admit(r.d.Clock.Now(), cmp.Or(from, m.From), m) {
		return // counted and logged
	}
	if !r.inbox.put(m) {
		r.dropped.Add(1)
		r.log.Warn().Str("type", m.Type.String()).Str("partition", m.PartID).Msg("inbox full: message dropped")
	}
}

// inbox queues received messages for the agent goroutine. It holds at
// most max messages and only what is queued: an idle agent's inbox costs
// no memory, so 100,000 simulated agents fit.
type inbox struct {
	mu   sync.Mutex
	q    []scheduler.Message
	max  int
	wake chan struct{} // signalled when q becomes non-empty
}

func (b *inbox) put(m scheduler.Message) bool {
	b.mu.Lock()
	if len(b.q) >= b.max {
		b.mu.Unlock()
		return false
	}
	b.q = append(b.q, m)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the queued messages in arrival order and empties the queue.
func (b *inbox) take() []scheduler.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

// post hands a result back to the agent goroutine unless ctx ended.
func (r *Runner) post(ctx context.Context, f func(*scheduler.Agent)) {
	select {
	case r.results <- f:
	case <-ctx.Done():
	}
}

func (r *Runner) flush(ctx context.Context) {
	rd := r.agent.Ready()
	defer r.notePartition()
	if rd.Empty() {
		return
	}
	for _, env := range rd.Messages {
		data, err := scheduler.Encode(env.Msg)
		if err == nil {
			err = r.d.Bus.Publish(ctx, bus.AgentSubject(r.cfg.Region, env.To), data)
		}
		if err != nil {
			r.log.Warn().Err(err).Str("to", env.To).Str("type", env.Msg.Type.String()).Msg("send failed")
			continue
		}
		if r.d.Hooks.OnSend != nil {
			r.d.Hooks.OnSend(r.agent.ID(), env.Msg)
		}
	}
	for _, req := range rd.Solve {
		r.startSolve(ctx, req)
	}
	for _, req := range rd.Execute {
		r.startExec(ctx, req)
	}
	for _, req := range rd.Arbiter {
		r.startArbiter(ctx, req)
	}
	for _, rec := range rd.Records {
		r.noteEnd(ctx, rec)
		r.logRecord(rec)
		if r.d.Hooks.OnRecord != nil {
			r.d.Hooks.OnRecord(r.agent.ID(), rec)
		}
	}
}

// notePartition publishes the agent's partition for Partition() and
// refreshes the host's view when the agent joins or leaves one.
func (r *Runner) notePartition() {
	p := r.agent.Partition()
	r.bounds.observe(r.d.Clock.Now(), p)
	r.mu.Lock()
	r.state = p
	r.mu.Unlock()
	if in := p != nil; in != r.inPart {
		// Left: a plan may have moved servers in or out. Joined: nothing
		// (monitor.go).
		r.inPart = in
		if !in {
			r.partitionRefresh()
		}
	}
}

func (r *Runner) logRecord(rec scheduler.Record) {
	lvl := zerolog.DebugLevel
	switch rec.Kind {
	case scheduler.RecEventRaised, scheduler.RecEventEnded, scheduler.RecPlanned, scheduler.RecMergeCommitted:
		lvl = zerolog.InfoLevel
	}
	e := r.log.WithLevel(lvl).Str("record", rec.Kind.String()).Str("partition", rec.Partition).Uint64("version", rec.Version).Int("size", rec.Size)
	if rec.Event.ID != "" {
		e = e.Str("event", rec.Event.ID).Str("kind", rec.Event.Kind.String())
	}
	if rec.Outcome != 0 {
		e = e.Str("outcome", rec.Outcome.String())
	}
	if rec.Class != "" {
		e = e.Str("class", string(rec.Class))
	}
	if rec.Moves > 0 {
		e = e.Int("moves", rec.Moves)
	}
	e.Str("reason", rec.Reason).Send()
}

func (r *Runner) startSolve(ctx context.Context, req scheduler.SolveRequest) {
	seed := r.rng.Int63()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		start := time.Now()
		opt := scheduler.DefaultSolveOptions()
		opt.Rand = rand.New(rand.NewSource(seed))
		opt.Now, opt.Deadline = time.Now, start.Add(r.wallDur(req.Timeout))
		opt.Migrations = r.est.Snapshot()
		req.Problem.Hosts = noDestination(req.Problem.Hosts, append(r.exec.Distrusted(), r.exec.implausibleIn(req.Problem.Hosts)...))
		sol, plan, perr := scheduler.SolveAndPlan(req.Problem, req.Limits, opt)
		if sol.OK && len(sol.Moves) > 0 {
			ev := r.log.Debug()
			if sol.Unconverging > 0 {
				ev = r.log.Warn() // no solution avoids them: the completion policy will decide
			}
			ev.Str("partition", req.PartID).Int("moves", len(sol.Moves)).Int("not_converging", sol.Unconverging).
				Dur("estimated_migration_time", sol.MigrationTime).Msg("solved: migration time as the estimator predicts it")
		}
		if r.d.Hooks.OnSolve != nil {
			r.d.Hooks.OnSolve(r.agent.ID(), req, sol, time.Since(start))
		}
		r.post(ctx, func(a *scheduler.Agent) { a.SolveDone(req.PartID, req.Version, sol, plan, perr) })
	}()
}

func (r *Runner) wallDur(d time.Duration) time.Duration {
	if s, ok := r.d.Clock.(*Scaled); ok {
		return s.Wall(d)
	}
	return d
}

func (r *Runner) startExec(ctx context.Context, req scheduler.ExecRequest) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.moves.add(req.Plan, +1)
		res := r.exec.ExecuteFenced(ctx, req.Event, req.Plan, runnerFence{r: r, part: req.PartID, leader: r.agent.ID()})
		r.moves.add(req.Plan, -1)
		if r.d.Hooks.OnExec != nil {
			r.d.Hooks.OnExec(r.agent.ID(), req.Event, res)
		}
		if r.d.Hooks.OnPlanExec != nil {
			r.d.Hooks.OnPlanExec(r.agent.ID(), req, res)
		}
		o, c, reason, replan := PlanOutcome(res, req.Moved > 0, ctx.Err() == nil, func() bool { return r.exec.Relieved(ctx, req.Event, req.Plan) })
		if replan {
			// The cloud changed under the plan and the event still
			// holds: the leader solves again in its partition (bounded).
			done := doneActions(res)
			r.post(ctx, func(a *scheduler.Agent) { a.PlanSkipped(req.PartID, req.Version, done, c, reason) })
			return
		}
		r.post(ctx, func(a *scheduler.Agent) { a.PlanDone(req.PartID, req.Version, o, c, reason) })
	}()
}

// startArbiter queues req on the runner's arbiter FIFO, started on first
// use: one goroutine owned by the runner (r.wg), stopped when ctx ends.
func (r *Runner) startArbiter(ctx context.Context, req scheduler.ArbiterRequest) {
	if r.arb == nil {
		r.arb = newArbiterQueue()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.arb.run(ctx, func(req scheduler.ArbiterRequest) {
				res := r.callArbiter(ctx, req)
				r.post(ctx, func(a *scheduler.Agent) { a.ArbiterDone(req, res) })
			})
		}()
	}
	r.arb.push(req)
}

func (r *Runner) callArbiter(ctx context.Context, req scheduler.ArbiterRequest) scheduler.ArbiterResult {
	res := CallArbiter(ctx, r.d.Arbiter, req)
	if res.Err != nil && !res.Unknown {
		r.log.Warn().Err(res.Err).Str("partition", req.Part.ID).Str("op", strconv.Itoa(int(req.Op))).Msg("arbiter request failed")
	}
	return res
}
