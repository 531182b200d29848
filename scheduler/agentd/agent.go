package agentd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/oscillation"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Members is what an agent needs of its membership: heartbeats over NATS
// (node.Membership) or SWIM (node.Swim).
type Members interface {
	Members() []node.Member
	Run(ctx context.Context) error
}

// Membership is what New hands the caller's membership constructor: the
// heartbeat this agent announces, what to call when a member comes or
// goes, and the coordinates to carry (nil when the agent runs none).
type Membership struct {
	Self     node.Heartbeat
	Up, Down func(host string)
	Coords   *node.CoordTable
	Vivaldi  *node.Vivaldi
	Signed   bus.Transport
	Clock    node.Clock
	Log      zerolog.Logger
}

// Options are everything one agent is built from. `dvms agent` fills
// them from its configuration (connections made, keys loaded, Nova
// answering); `dvms simulate` from its harness (the fake cloud, a scaled
// clock, a shared arbiter).
type Options struct {
	// Runtime and Agent configure the runner; Agent.ID is the host and
	// an empty Agent.Incarnation gets a fresh one.
	Runtime node.Config
	Agent   scheduler.Config
	Site    string
	Version string // the build, in heartbeats, status and metrics

	// Bus is the plain connection: status answers, operator controls
	// (they carry their own signature) and journal updates. Signed, if
	// set, carries the protocol (bus/auth); nil: Bus.
	Bus    bus.Transport
	Signed bus.Transport
	Nova   nova.Client
	// Meter counts the requests to Nova (nil: not exported).
	Meter  *nova.Meter
	Demand nova.DemandSource
	// DemandName names the demand source in status ([monitor] source).
	DemandName string
	Arbiter    Arbiter
	Clock      node.Clock
	Log        zerolog.Logger
	// Seed seeds the solver's restarts, the coordinates' and the
	// controls' jitter.
	Seed int64

	// Membership builds the agent's membership (nil: the caller tells
	// the agent of members itself with MemberUp and MemberDown, as the
	// simulator's ideal membership does).
	Membership func(Membership) (Members, error)
	// Ring, if set, is the member list shared with the other agents of
	// the process (node.Deps.Ring); nil: this agent alone at first.
	Ring *scheduler.Ring
	// Watcher says whether this agent is the region's maintenance watch
	// (nil: the live member with the smallest host name).
	Watcher func() bool

	// Coords, if set, runs Vivaldi coordinates over Signed, kept in
	// Table; Peers, if set, are the coordinates' peers from the start.
	Coords *Coords

	// Controls: operator commands must be signed by a key of
	// OperatorKeys (Secure; nil: all refused) and be at most Window old
	// when published, ControlMaxAge when passed on (0:
	// control.DefaultMaxAge; an agent forgets a command at that age).
	Secure        bool
	OperatorKeys  *auth.Keyring
	Window        time.Duration
	ControlMaxAge time.Duration

	// Summary, if set, publishes host summaries (dvms scheduler-api).
	Summary *node.SummaryConfig
	// Reviver, if set, unshelves what preemption shelved.
	Reviver *node.ReviverConfig
	// Hooks observe the runner after the agent's metrics and journal.
	Hooks node.Hooks
	// MetricsListen serves /metrics and /healthz ("": not served).
	MetricsListen string
}

// Coords are the agent's Vivaldi coordinates (DESIGN §5.3).
type Coords struct {
	Config node.CoordConfig
	Table  *node.CoordTable
	Peers  []string
}

// Validate lists what the options lack.
func (o Options) Validate() error {
	var errs []error
	if o.Agent.ID == "" {
		errs = append(errs, errors.New("agentd: no host (Agent.ID)"))
	}
	if o.Bus == nil || o.Nova == nil || o.Demand == nil || o.Arbiter == nil || o.Clock == nil {
		errs = append(errs, errors.New("agentd: Bus, Nova, Demand, Arbiter and Clock are required"))
	}
	if o.Coords != nil && o.Coords.Table == nil {
		errs = append(errs, errors.New("agentd: Coords without a Table"))
	}
	if o.ControlMaxAge != 0 {
		if err := control.ValidateMaxAge(o.ControlMaxAge, o.Window); err != nil {
			errs = append(errs, fmt.Errorf("agentd: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Agent is one whole agent: runner (monitor, executor, watch),
// membership, coordinates, arbiter peers, operator controls, status,
// journal, reviver and metrics. Stop order matters: the runner first (it
// may still need the arbiter and the bus to end its partition), then
// the goodbye heartbeat, then the arbiter and the services. The caller
// owns the connections and closes them after Wait.
type Agent struct {
	opt     Options
	host    string
	log     zerolog.Logger
	runner  *node.Runner
	member  Members
	viv     *node.Vivaldi
	reviver *node.Reviver
	journal *journal.Journal
	// osc notices oscillations (observed only: `dvms status`, metrics, log).
	osc      *oscillation.Detector
	controls *control.Registers
	// approvals: the advised plans kept for `dvms plans approve`.
	approvals *approvals
	metrics   *agentMetrics
	httpSrv   *metricsServer
	started   time.Time
	stopping  atomic.Bool // ctx ended: the runner is retiring
	running   atomic.Bool // the runner's Run has not returned

	runDone  chan error
	stopRest context.CancelFunc
	wg       sync.WaitGroup
}

// New builds an agent; nothing runs before Start.
func New(o Options) (*Agent, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Signed == nil {
		o.Signed = o.Bus
	}
	// The decision part first: the state machine and its configuration.
	dec, err := NewDecision(o)
	if err != nil {
		return nil, err
	}
	o.Agent = dec.Config()
	host := o.Agent.ID
	a := &Agent{opt: o, host: host, log: o.Log, runDone: make(chan error, 1), started: o.Clock.Now()}
	watcher := o.Watcher
	if watcher == nil {
		watcher = func() bool {
			ms := a.Members()
			return len(ms) > 0 && ms[0].Host == host
		}
	}
	a.opt.Watcher = watcher
	// Operators' view: the journal behind `dvms status` / `dvms events`
	// and the Prometheus metrics, both fed by the runner's hooks.
	a.journal = journal.New(host, o.Clock.Now)
	// `dvms events --follow` listens on the plain connection, as status;
	// with keys the updates are signed with this agent's key, as its
	// status answers (status.UpdateReader verifies them).
	updates := o.Bus
	if o.Secure {
		updates = o.Signed
	}
	a.journal.OnUpdate = func(u journal.Update) {
		if data, err := json.Marshal(u); err == nil {
			_ = updates.Publish(context.Background(), bus.EventsSubject(o.Runtime.Region), data)
		}
	}
	a.controls = dec.Controls()
	a.metrics = newAgentMetrics(metricsSources{
		host: host, region: o.Runtime.Region, version: o.Version, meter: o.Meter,
		advise:    func() bool { return a.controls.Advise(host) },
		paused:    a.controls.Paused,
		excluded:  func() bool { return a.controls.Excluded(host) },
		dropped:   func() int64 { return a.runner.Dropped() },
		bounded:   func() map[string]int64 { return a.runner.BoundDrops() },
		members:   func() int { return len(a.Members()) },
		watch:     watcher,
		partition: func() *scheduler.Partition { return a.runner.Partition() },
		arbiter:   func() *status.ArbiterInfo { return arbiterStatus(o.Arbiter) },
		coverage:  a.coverage,
	})
	if o.Coords != nil {
		if a.viv, err = node.NewVivaldi(o.Coords.Config, o.Runtime.Region, host, o.Signed, o.Clock, o.Coords.Table, o.Seed, o.Log); err != nil {
			return nil, err
		}
		if o.Coords.Peers != nil {
			a.viv.SetPeers(o.Coords.Peers)
		}
	}
	a.osc = oscillation.New(o.Runtime.Oscillation, o.Clock.Now)
	hooks := chain(chain(observeHooks(a.metrics, a.journal, o.Clock.Now),
		oscillationHooks(host, a.osc, a.metrics.oscillations, o.Log)), o.Hooks)
	a.approvals = newApprovals(host, a.journal, o.Log, o.Clock.Now)
	a.approvals.onExec = func(ev scheduler.Event, res node.ExecResult) {
		if hooks.OnExec != nil {
			hooks.OnExec(host, ev, res)
		}
	}
	keep := a.approvals.keep
	if f := hooks.OnPlanExec; f != nil {
		hooks.OnPlanExec = func(h string, req scheduler.ExecRequest, res node.ExecResult) { keep(req, res); f(h, req, res) }
	} else {
		hooks.OnPlanExec = func(_ string, req scheduler.ExecRequest, res node.ExecResult) { keep(req, res) }
	}
	a.runner, err = node.New(o.Runtime, o.Agent, nil, node.Deps{
		Bus: o.Signed, Nova: o.Nova, Demand: o.Demand, Arbiter: o.Arbiter, Clock: o.Clock, Log: o.Log,
		Seed: o.Seed, Watcher: watcher, Hooks: hooks,
		Controls: a.controls, Agent: dec.Agent(),
	})
	if err != nil {
		return nil, err
	}
	a.approvals.run = a.runner.ExecuteApproved
	if o.Membership != nil {
		mb := Membership{
			Self: node.Heartbeat{Host: host, Site: o.Site, Version: o.Version, Incarnation: o.Agent.Incarnation, Raft: o.Arbiter.RaftAddr()},
			Up:   a.MemberUp, Down: a.MemberDown, Vivaldi: a.viv, Signed: o.Signed, Clock: o.Clock, Log: o.Log,
		}
		if o.Coords != nil {
			mb.Coords = o.Coords.Table
		}
		if a.member, err = o.Membership(mb); err != nil {
			return nil, err
		}
		a.peers()
	}
	if o.Reviver != nil {
		if a.reviver, err = node.NewReviver(*o.Reviver, o.Nova, o.Demand, a.runner.LastSample, o.Clock, o.Log); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func newIncarnation() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(b)
}

// chain calls a's hooks, then b's.
func chain(a, b node.Hooks) node.Hooks {
	h := a
	if f, g := a.OnRecord, b.OnRecord; g != nil {
		h.OnRecord = func(host string, r scheduler.Record) { f(host, r); g(host, r) }
	}
	if f, g := a.OnSend, b.OnSend; g != nil {
		h.OnSend = func(host string, m scheduler.Message) { f(host, m); g(host, m) }
	}
	if f, g := a.OnExec, b.OnExec; g != nil {
		h.OnExec = func(host string, ev scheduler.Event, r node.ExecResult) { f(host, ev, r); g(host, ev, r) }
	}
	if f, g := a.OnAdopt, b.OnAdopt; g != nil {
		h.OnAdopt = func(host string, ev scheduler.Event, r node.ExecResult) { f(host, ev, r); g(host, ev, r) }
	}
	if f, g := a.OnSolve, b.OnSolve; g != nil {
		h.OnSolve = func(host string, req scheduler.SolveRequest, sol scheduler.Solution, took time.Duration) {
			f(host, req, sol, took)
			g(host, req, sol, took)
		}
	}
	if f, g := a.OnCompletion, b.OnCompletion; g != nil {
		h.OnCompletion = func(host, what, result string) { f(host, what, result); g(host, what, result) }
	}
	if f, g := a.OnPlanExec, b.OnPlanExec; g != nil {
		h.OnPlanExec = g
		if f != nil {
			h.OnPlanExec = func(host string, req scheduler.ExecRequest, r node.ExecResult) { f(host, req, r); g(host, req, r) }
		}
	}
	return h
}

// peers tells the arbiter the live members.
func (a *Agent) peers() {
	var ps []consensus.Peer
	for _, m := range a.Members() {
		ps = append(ps, consensus.Peer{ID: m.Host, Site: m.Site, RaftAddr: m.Raft})
	}
	a.opt.Arbiter.SetPeers(ps)
}

// MemberUp tells the runner, the coordinates and the arbiter that host
// is a live member (the membership calls it; a harness without one too).
func (a *Agent) MemberUp(host string) {
	a.runner.MemberUp(host)
	if a.viv != nil {
		a.viv.PeerUp(host)
	}
	if a.member != nil {
		a.peers()
	}
}

// MemberDown is MemberUp's opposite.
func (a *Agent) MemberDown(host string) {
	a.runner.MemberDown(host)
	if a.viv != nil {
		a.viv.PeerDown(host)
	}
	if a.member != nil {
		a.peers()
	}
}

// Start runs every part; the runner retires when ctx ends (Wait).
func (a *Agent) Start(ctx context.Context) {
	o := a.opt
	if o.MetricsListen != "" {
		// Metrics are not worth stopping the scheduling for (several
		// agents on one test host share the default port): logged.
		var err error
		if a.httpSrv, err = startMetricsServer(o.MetricsListen, a.metrics.reg, a.Healthy); err != nil {
			a.log.Error().Err(err).Str("listen", o.MetricsListen).Msg("no /metrics nor /healthz: [DEFAULT] metrics_listen unusable")
		} else {
			a.log.Info().Str("listen", a.httpSrv.Addr()).Msg("serving /metrics and /healthz")
		}
	}
	// Arbiter, membership and the services outlive the runner's ctx:
	// they stop after it.
	rest, stopRest := context.WithCancel(context.WithoutCancel(ctx))
	a.stopRest = stopRest
	a.goRun(func() error { return o.Arbiter.Run(rest) }, "merge arbiter")
	memberCtx, stopMember := context.WithCancel(rest)
	if a.member != nil {
		a.goRun(func() error { return a.member.Run(memberCtx) }, "membership")
	}
	if a.viv != nil {
		a.goRun(func() error { return a.viv.Run(memberCtx) }, "coordinates")
	}
	if a.reviver != nil {
		a.goRun(func() error {
			return a.reviver.Run(ctx, o.Signed, func() bool { return a.runner.Partition() != nil })
		}, "unshelve")
	}
	if o.Summary != nil {
		a.goRun(func() error { return a.runner.PublishSummaries(ctx, *o.Summary) }, "host summaries")
	}
	st := &status.Service{Region: o.Runtime.Region, Bus: o.Bus, Log: a.log, Answer: a.Report}
	if o.Secure {
		st.Signed = o.Signed // answers signed with this agent's key
	}
	a.goRun(func() error { return st.Run(rest) }, "status service")
	ctl := &control.Service{Region: o.Runtime.Region, Host: a.host, Bus: o.Bus, Secure: o.Secure, Window: o.Window, MaxAge: o.ControlMaxAge,
		Ring: o.OperatorKeys, Registers: a.controls, Watch: o.Watcher, Log: a.log,
		DropLog: a.log.Sample(&zerolog.BurstSampler{Burst: 10, Period: 10 * time.Second}),
		Now:     o.Clock.Now, Rand: mrand.New(mrand.NewSource(o.Seed)),
		Members: func() []string {
			var hs []string
			for _, m := range a.Members() {
				hs = append(hs, m.Host)
			}
			return hs
		},
		Apply: func() { a.runner.Control(a.controls.Paused(), a.controls.Excluded(a.host)) },
		Plans: a.approvals.take,
	}
	a.goRun(func() error { return a.approvals.Run(ctx) }, "plan approvals")
	a.goRun(func() error { return ctl.Run(rest) }, "operator controls")
	a.running.Store(true)
	go func() {
		err := a.runner.Run(ctx)
		a.running.Store(false)
		stopMember() // goodbye heartbeat once the partition role is handed back
		a.runDone <- err
	}()
	go func() {
		<-ctx.Done()
		a.stopping.Store(true)
	}()
}

func (a *Agent) goRun(f func() error, what string) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := f(); err != nil {
			a.log.Error().Err(err).Str("part", what).Msg("stopped with an error")
		}
	}()
}

// Wait returns when the runner has stopped (Start's ctx ended), after
// the other parts stopped too.
func (a *Agent) Wait() error {
	err := <-a.runDone
	a.Close()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// Close stops the parts that outlive the runner and waits for them; for
// an agent that never started, it does nothing.
func (a *Agent) Close() {
	if a.httpSrv != nil {
		a.httpSrv.Close()
	}
	if a.stopRest != nil {
		a.stopRest()
	}
	a.wg.Wait()
}

// Runner is the agent's runtime.
func (a *Agent) Runner() *node.Runner { return a.runner }

// Registers are the operators' controls this agent holds.
func (a *Agent) Registers() *control.Registers { return a.controls }

// Journal is the agent's journal of events.
func (a *Agent) Journal() *journal.Journal { return a.journal }

// Coordinates are the agent's Vivaldi coordinates (nil: it runs none).
func (a *Agent) Coordinates() *node.Vivaldi { return a.viv }

// Incarnation is this run's incarnation.
func (a *Agent) Incarnation() string { return a.opt.Agent.Incarnation }

// Running: the runner's Run has not returned.
func (a *Agent) Running() bool { return a.running.Load() }

// MetricsAddr is where /metrics and /healthz are served ("": nowhere).
func (a *Agent) MetricsAddr() string {
	if a.httpSrv == nil {
		return ""
	}
	return a.httpSrv.Addr()
}

// Members are the live members as this agent hears them (none without a
// membership of its own).
func (a *Agent) Members() []node.Member {
	if a.member == nil {
		return nil
	}
	return a.member.Members()
}

// Healthy is /healthz: the runner runs and, when the bus says, it is
// connected.
func (a *Agent) Healthy() error {
	switch {
	case !a.running.Load():
		return errors.New("agent: runner stopped")
	case a.stopping.Load():
		return errors.New("agent: stopping")
	}
	if c, ok := a.opt.Bus.(interface{ Connected() bool }); ok && !c.Connected() {
		return errors.New("agent: NATS disconnected")
	}
	return nil
}

// Report is this agent's answer to a status request.
func (a *Agent) Report(req status.Request) status.Report {
	part := a.runner.Partition()
	o := a.opt
	now := o.Clock.Now()
	return status.Report{
		V: 1, Host: a.host, Site: o.Site, Version: o.Version, Incarnation: o.Agent.Incarnation,
		Started: a.started, Now: now, State: status.StateOf(a.host, part, a.stopping.Load()),
		Advise: a.controls.Advise(a.host), Excluded: a.controls.Excluded(a.host), Control: a.controls.View(),
		Watch:     o.Watcher(),
		Partition: status.PartitionOf(part), Members: status.MembersOf(a.Members()), Arbiter: arbiterStatus(o.Arbiter),
		Demand: a.demandInfo(), Windows: status.WindowsOf(o.Agent.Windows, now),
		Events:       journal.Filter(a.journal.Snapshot(), req.Since, req.MaxEvents),
		Held:         journal.FilterHeld(a.journal.Held(), req.Since),
		Oscillations: a.osc.Recent(),
	}
}

// coverageSource is a demand source that says what it sees of its host
// (the cgroup source).
type coverageSource interface{ Coverage() cgroup.Coverage }

// coverage is the demand source's coverage, ok false when it does not say.
func (a *Agent) coverage() (cgroup.Coverage, bool) {
	cs, ok := a.opt.Demand.(coverageSource)
	if !ok {
		return cgroup.Coverage{}, false
	}
	return cs.Coverage(), true
}

// demandInfo is the demand source's coverage for `dvms status` (nil when
// the source does not say).
func (a *Agent) demandInfo() *status.DemandInfo {
	c, ok := a.coverage()
	if !ok {
		return nil
	}
	return &status.DemandInfo{Source: a.opt.DemandName, Coverage: c}
}
