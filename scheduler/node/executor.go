package node

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/fit"
	"github.com/dvms-project/dvms/scheduler/migest"
)

// ExecConfig tunes the executor.
type ExecConfig struct {
	// MigrationTimeout bounds one action, from request to terminal state.
	MigrationTimeout time.Duration
	// Poll is the interval between status reads while following an action.
	Poll time.Duration
	// ReadTimeout bounds one status read while following an action, so a
	// read that hangs costs one poll, not the whole MigrationTimeout (the
	// gophercloud client has its own per-request bound; a nova.Client
	// that has none, like nova/fake's injected timeouts, gets this one).
	// Zero means 30 s.
	ReadTimeout time.Duration
	// QueuePerHost is how many live migrations per source host the
	// executor hands Nova beyond the one it runs (Nova queues them behind
	// max_concurrent_live_migrations), counted on both ends while queued,
	// so a host's next migration starts the moment the previous ends.
	QueuePerHost int
	// RecheckTimeout bounds the whole re-check of one action (all its
	// reads). On a queued API it stretches to 3 × the latency the agent
	// measures on its Nova reads, up to 3 × RecheckTimeout (a minute at
	// the default): a re-check waits for a busy Nova's queue rather than
	// abort the plan half-way, and a hung Nova (no read answers, nothing
	// measured) still aborts it at RecheckTimeout.
	RecheckTimeout time.Duration
	// Unresponsive: a followed action whose status reads all failed for
	// this long ends as failed (outcome unknown, recorded), so a hung Nova
	// does not hold the partition for MigrationTimeout.
	Unresponsive time.Duration
	// Retries of a read that failed with nova.ErrUnavailable (5xx,
	// connection), spaced by Backoff doubling each time, within
	// RecheckTimeout. Clients that retry themselves (nova/openstack does)
	// need none: set 0 so there is one retry layer.
	Retries int
	Backoff time.Duration
	// DryRun (advise mode) re-checks and records every action but sends
	// nothing to Nova.
	DryRun bool
	// Completion is the policy for a live migration that does not
	// converge (completion.go).
	Completion CompletionConfig
	// GrantValidity bounds how long a fenced plan (ExecuteFenced) may
	// take from asking the source host's agent for an action's grant to
	// handing the action to Nova; the request itself is bounded by twice
	// it. An agent that lost its leader judges the leader's moves no
	// earlier than 2 × GrantValidity after its last grant, and re-reads
	// its host once per GrantValidity while they run (fence.go).
	GrantValidity time.Duration
	// MaintenanceActions: what a drain does with a server whose flavor
	// (or trusted metadata) sets no nova.MetaMaintenanceAction, an
	// ordered comma-separated list (maint.go); "" means live_migrate,
	// the default.
	MaintenanceActions string
}

// DefaultExecConfig returns 10 min per action, 2 s polls, 3 retries.
func DefaultExecConfig() ExecConfig {
	return ExecConfig{MigrationTimeout: 10 * time.Minute, Poll: time.Second, Retries: 3, Backoff: time.Second,
		QueuePerHost: 1, RecheckTimeout: 20 * time.Second, Unresponsive: time.Minute, Completion: DefaultCompletionConfig(),
		GrantValidity: 5 * time.Second, MaintenanceActions: string(nova.MaintLiveMigrate)}
}

// Validate lists every problem.
func (c ExecConfig) Validate() error {
	var errs []error
	if c.MigrationTimeout <= 0 || c.Poll <= 0 || c.Backoff <= 0 {
		errs = append(errs, errors.New("migration_timeout, poll_interval and retry_backoff must be > 0"))
	}
	if c.Retries < 0 {
		errs = append(errs, errors.New("retries must be >= 0"))
	}
	if c.QueuePerHost < 0 {
		errs = append(errs, errors.New("queued_migrations_per_host must be >= 0"))
	}
	if c.RecheckTimeout <= 0 || c.Unresponsive <= 0 {
		errs = append(errs, errors.New("recheck_timeout and nova_unresponsive_after must be > 0"))
	}
	if c.GrantValidity <= 0 {
		errs = append(errs, errors.New("action_grant_validity must be > 0"))
	}
	if c.MaintenanceActions != "" {
		if _, err := nova.ParseMaintenanceActions(c.MaintenanceActions); err != nil {
			errs = append(errs, fmt.Errorf("maintenance_actions: %w", err))
		}
	}
	if err := c.Completion.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ActionOutcome is how one action ended.
type ActionOutcome uint8

const (
	// ActionDone: Nova did it (the migration completed, the server is
	// shelved-offloaded or active again).
	ActionDone ActionOutcome = iota + 1
	// ActionSkipped: nothing was sent to Nova, or Nova refused it with a
	// conflict (the server got busy): the world changed, nothing moved.
	ActionSkipped
	// ActionFailed: Nova accepted and it failed, timed out, or its
	// outcome is unknown (recorded; Nova's migration list has it).
	ActionFailed
)

func (o ActionOutcome) String() string {
	switch o {
	case ActionDone:
		return "done"
	case ActionSkipped:
		return "skipped"
	case ActionFailed:
		return "failed"
	}
	return "unknown"
}

// ReasonClass sorts why an action was skipped or failed into a few
// values, set where the executor decides (Reason says it in words, with
// servers and hosts: unbounded). The values are Prometheus label values
// (scheduler/agentd/metrics.go): renaming one breaks dashboards.
type ReasonClass string

// Reason classes.
const (
	ReasonNone                ReasonClass = "none"                 // done
	ReasonAdvise              ReasonClass = "advise"               // advise mode: re-checked, not sent
	ReasonPaused              ReasonClass = "paused"               // the operator paused the region
	ReasonExcluded            ReasonClass = "excluded"             // source or destination excluded by the operator
	ReasonStopping            ReasonClass = "stopping"             // the agent is stopping
	ReasonCancelled           ReasonClass = "cancelled"            // an earlier action failed
	ReasonReadFailed          ReasonClass = "read_failed"          // a re-check read failed
	ReasonEvent               ReasonClass = "event_reason"         // the plan's event no longer holds (its host's measurement, Nova for a drain)
	ReasonEventUnverified     ReasonClass = "event_unverified"     // the plan's event (or a source's consent) could not be verified (a read failed, the host's agent did not answer)
	ReasonNoConsent           ReasonClass = "no_consent"           // the source host did not consent: not drained in Nova, neither over- nor underloaded by its own measurement
	ReasonServerChanged       ReasonClass = "server_changed"       // moved, busy or migrating
	ReasonServerGroup         ReasonClass = "server_group"         // (anti-)affinity
	ReasonDestinationDisabled ReasonClass = "destination_disabled" // service disabled, down or forced down
	ReasonDestinationBusy     ReasonClass = "destination_busy"     // migrations from elsewhere into it
	ReasonPlacement           ReasonClass = "placement"            // allocation no longer fits
	ReasonOverload            ReasonClass = "overload"             // demand would overload the destination
	ReasonConflict            ReasonClass = "conflict"             // Nova refused with 409
	ReasonTimeout             ReasonClass = "timeout"              // no end in time, or outcome unknown
	ReasonFailed              ReasonClass = "failed"               // Nova refused or the action failed otherwise
	// The completion policy (completion.go) acted on a live migration
	// that did not converge: ReasonForceCompleted on an action done after
	// dvms forced it to complete, ReasonMigrationAborted on an action
	// failed because dvms aborted it (the server stays ACTIVE on its
	// source, re-read and recorded in the reason).
	ReasonForceCompleted   ReasonClass = "force_completed"
	ReasonMigrationAborted ReasonClass = "migration_aborted"
	// ReasonFenced: the source host's agent did not grant the action (it
	// no longer follows this leader, or did not answer: the leader lost
	// the bus), or the grant expired before the action could be sent
	// (fence.go). Nothing was sent.
	ReasonFenced ReasonClass = "fenced"
	// A drain's maintenance actions (maint.go). ReasonMaintenanceAction:
	// done by the action the server's maintenance action chose (cold
	// migration, shelve-offload) instead of a live migration;
	// ReasonFallback: done by a later action after Nova refused or failed
	// an earlier one (the later one's re-check found the server ACTIVE on
	// its source again);
	// ReasonLeftForOwner: skipped, the server left on its host for its
	// owner (notify); nothing was sent to Nova.
	ReasonMaintenanceAction ReasonClass = "maintenance_action"
	ReasonFallback          ReasonClass = "fallback"
	ReasonLeftForOwner      ReasonClass = "left_for_owner"
)

// ActionResult is what happened to one action.
type ActionResult struct {
	Action  scheduler.Action
	Outcome ActionOutcome
	Class   ReasonClass
	Reason  string
	Receipt nova.Receipt
	// Grant is the id of the source host's grant for a fenced action
	// ("" unfenced): the action's record by the leader and the one by
	// the source's agent, which follows it in Nova when the leader is
	// lost, share it (journal.Join keeps one).
	Grant string
}

// skip is a re-check's verdict: why the action does not run ("" when
// it does) and its class.
type skip struct {
	class ReasonClass
	why   string
}

func skipf(c ReasonClass, format string, args ...any) skip {
	return skip{class: c, why: fmt.Sprintf(format, args...)}
}

// ExecResult sums up a plan's execution.
type ExecResult struct {
	Actions []ActionResult
	Done    int
	Skipped int
	Failed  int
}

// Controls are the operator's run-time controls as this agent knows them
// (`dvms pause`, `dvms exclude`, `dvms mode`; cmd/dvms keeps them
// converged across the region). Implementations are safe for concurrent
// use and answer from memory.
type Controls interface {
	// Paused: the region is paused, no action starts.
	Paused() bool
	// Excluded: host is never a source nor a destination.
	Excluded(host string) bool
	// Advise: the moves from or to host are re-checked and recorded, not
	// sent to Nova.
	Advise(host string) bool
}

// Executor runs plans against Nova (DESIGN §5.5). Before each action it
// re-reads the server and the destination and skips what no longer
// holds; it follows each action to its end. It keeps each source host
// busy: an action of the next step is handed to Nova as soon as every
// action of the steps before it was accepted, as long as its source has
// fewer than 1 + QueuePerHost actions in Nova's hands (Nova queues them
// behind max_concurrent_live_migrations) and no earlier action is still
// freeing room on its destination. Actions in flight count on both ends
// in every re-check, as the planner counts a step's moves. A failed
// action stops every action not started yet.
type Executor struct {
	cfg    ExecConfig
	nova   nova.Client
	demand nova.DemandSource // local measurements; other hosts from the plan's snapshot
	thr    scheduler.Thresholds
	clock  Clock
	log    zerolog.Logger
	// OnAction, if set, is called after every action (metrics).
	OnAction func(ActionResult)
	// OnCompletion, if set, is called after every force_complete or
	// abort the completion policy sent (what, and Completion* result).
	OnCompletion func(what, result string)
	// Estimator, if set, learns from every live migration followed to
	// its end (the leader's solver reads it, scheduler/migest).
	Estimator *migest.Estimator
	// Ask, if set, asks a host's agent for its latest local measurement
	// (hosts the executor's own source does not measure).
	Ask func(ctx context.Context, host string) (map[string]nova.Demand, error)
	// OnShelved, if set, is called after a server was shelved-offloaded
	// (the agents with room may unshelve it later).
	OnShelved func(serverID string)
	// DrainReason: a disabled service whose reason matches is being
	// drained (executor_reason.go); nil: DefaultConfig's.
	DrainReason *regexp.Regexp
	// lat: the latency of the last Nova reads (a moving average, ns of
	// the executor's clock), see ExecConfig.RecheckTimeout.
	lat atomic.Int64
	// Controls, if set, are read before each action starts (paused,
	// excluded) and after its re-check (advise, which then replaces
	// ExecConfig.DryRun); an action already in Nova's hands is followed to
	// its end whatever they say.
	Controls Controls
	// liars: destinations caught under-reporting a server they received
	// (liar.go).
	liars distrust
	// words: hosts whose word was judged implausible (liar.go).
	words words
}

// NewExecutor returns an executor.
func NewExecutor(cfg ExecConfig, c nova.Client, d nova.DemandSource, thr scheduler.Thresholds, clock Clock, log zerolog.Logger) *Executor {
	return &Executor{cfg: cfg, nova: c, demand: d, thr: thr, clock: clock, log: log}
}

// RequestID derives the X-OpenStack-Request-ID of an event: "req-" and a
// name-based UUID of the event id, so one event's actions share it.
func RequestID(eventID string) string {
	h := sha1.Sum([]byte("dvms:" + eventID))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("req-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// flight is what the plan has in flight, shared by the re-checks.
type flight struct {
	mu sync.Mutex
	// flying: the plan's moves into each host, re-checked and not given
	// back (a move done stays until the plan ends, see settle),
	// by server. A later re-check counts those its destination does not
	// list yet (a completed move is listed, and measured, there).
	flying map[string]map[string]*reservation
	// groups: server-group members moving into each host (anti-affinity).
	groups map[string]map[string]int
	// snap: the snapshot demand of every server the plan's partition
	// saw, and the host it saw it on.
	snap map[string]snapped
	// read: the plan's latest reading of each server's demand, from any
	// of its re-checks, noted as each answer arrives (note). A re-check
	// judges every server at it: two moves into one host re-checked
	// together read the host twice, and the one deciding first must not
	// decide on its own older answer when the other's is newer. (Seen:
	// a move judged a destination server at 0.00 cores, read first,
	// while the plan's later read said 0.90, and started into 16.04 of
	// 16 cores; the safety observer judges by the plan's last read.)
	read map[string]nova.Demand
	// reasons: by event host, why the plan's event does not justify its
	// actions (empty when it does), see executor_reason.go.
	reasons map[string]skip
	// fence grants each action before it is sent (nil: unfenced);
	// refused: by source host, its agent's refusal (fence.go).
	fence   Fence
	refused map[string]skip
	// carried: by server, its demand on its source as the re-check of its
	// move judged it (liar.go).
	carried map[string]nova.Demand
	// vouched: destinations whose answer after a move into them listed
	// the server at what it carried.
	vouched map[string]bool
	// wordRef: the reference RAM share (scheduler.WordReference) of the plan's snapshot hosts, what a
	// destination's answer is judged plausible against (ok false: no
	// reference), see scheduler/plausible.go.
	wordRef   float64
	wordRefOK bool
}

type load struct {
	cpu, ram     float64 // demand
	vcpus, ramMB int     // flavor
}

// note records d, the demand of a host's servers just read by a
// re-check, as the plan's latest reading of each.
func (f *flight) note(d map[string]nova.Demand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read == nil {
		f.read = map[string]nova.Demand{}
	}
	maps.Copy(f.read, d)
}

// snapped is a server as the plan's snapshot saw it.
type snapped struct {
	host string
	d    nova.Demand
}

// unread is the demand a re-check counts for sv, listed on host, that
// the plan has no reading of (f.mu held): the snapshot's when the
// snapshot saw it there (no agent to ask), the plan's reservation when
// the plan itself moved it there, else its flavor, the most it can use.
// A server another plan just brought is not judged at this plan's
// snapshot of it on its old host: its demand may have grown since, and
// the move would start into a destination that is full (the safety
// observer judges such a server at its demand now).
func (f *flight) unread(host string, sv nova.Server) nova.Demand {
	if s, ok := f.snap[sv.ID]; ok && s.host == host {
		return s.d
	}
	if r, ok := f.flying[host][sv.ID]; ok {
		return nova.Demand{CPU: r.l.cpu, RAMMB: r.l.ram}
	}
	return nova.Demand{CPU: float64(sv.VCPUs), RAMMB: float64(sv.RAMMB)}
}

// arriving sums the plan's moves into host that its listing (listed, by
// server) does not show yet: their load, and the VCPUs of those Nova
// accepted (placement holds them, or will soon) (f.mu held). A moving
// server's demand is taken from fresh (the plan's latest reading, see
// flight.read) when it has one, and the reservation updated: the
// value reserved at its own re-check may be seconds old. (Seen: a plan
// moving three servers from one host into another counted the first at
// the 0.56 core reserved while its source, read again, measured 0.76,
// and started the third move into 16.14 of 16 cores.)
func (f *flight) arriving(host string, listed map[string]bool, fresh map[string]nova.Demand) (in load, acceptedVCPUs int) {
	for id, r := range f.flying[host] {
		if listed[id] {
			continue
		}
		if d, ok := fresh[id]; ok {
			r.l.cpu, r.l.ram = d.CPU, d.RAMMB
		}
		in.add(r.l, 1)
		if r.accepted {
			acceptedVCPUs += r.l.vcpus
		}
	}
	return in, acceptedVCPUs
}

// task is one action's progress in Execute.
type task struct {
	a        scheduler.Action
	step     int
	started  bool
	accepted bool // Nova accepted it, or it ended
	ended    bool
}

// progress is what an action's goroutine reports.
type progress struct {
	i        int
	accepted bool          // Nova accepted the request (the action goes on)
	res      *ActionResult // the action ended
}

// Execute runs the plan for ev and returns what happened (actions in plan
// order).
func (e *Executor) Execute(ctx context.Context, ev scheduler.Event, plan scheduler.Plan) ExecResult {
	return e.ExecuteFenced(ctx, ev, plan, nil)
}

// ExecuteFenced is Execute with each action fenced: right before it is
// handed to Nova, fence grants it (the source host's agent still
// follows this plan's leader) or it is skipped (ReasonFenced); it is sent
// within GrantValidity of the grant's asking or not at all. nil: no fence.
func (e *Executor) ExecuteFenced(ctx context.Context, ev scheduler.Event, plan scheduler.Plan, fence Fence) ExecResult {
	ctx = nova.WithRequestID(ctx, RequestID(ev.ID))
	f := newFlight(plan)
	f.fence = fence
	var tasks []*task
	for k, step := range plan.Steps {
		for _, a := range step {
			tasks = append(tasks, &task{a: a, step: k})
		}
	}
	results := make([]ActionResult, len(tasks))
	reports := make(chan progress, 2*len(tasks))
	outstanding := map[string]int{} // started and not ended, by source host
	running, stop := 0, skip{}
	for {
		if stop.why == "" && ctx.Err() != nil {
			stop = skip{ReasonStopping, "stopping: " + ctx.Err().Error()}
		}
		if stop.why == "" {
			for i, t := range tasks {
				if t.started || !e.eligible(tasks, i, outstanding, f) {
					continue
				}
				t.started = true
				outstanding[t.a.From]++
				running++
				go e.runTask(ctx, ev, i, t.a, f, reports)
			}
		}
		if running == 0 {
			break
		}
		p := <-reports
		t := tasks[p.i]
		if p.accepted {
			t.accepted = true
			continue
		}
		t.accepted, t.ended = true, true
		outstanding[t.a.From]--
		running--
		results[p.i] = *p.res
		if p.res.Outcome == ActionFailed && stop.why == "" {
			stop = skip{ReasonCancelled, "cancelled: an earlier action failed"}
		}
		if e.OnAction != nil {
			e.OnAction(*p.res)
		}
	}
	var out ExecResult
	for i, t := range tasks {
		if !t.started {
			results[i] = ActionResult{Action: t.a, Outcome: ActionSkipped, Class: stop.class, Reason: stop.why}
		}
		out.Actions = append(out.Actions, results[i])
		switch results[i].Outcome {
		case ActionDone:
			out.Done++
		case ActionSkipped:
			out.Skipped++
		default:
			out.Failed++
		}
	}
	return out
}

// eligible says whether task i may start now (see Executor).
func (e *Executor) eligible(tasks []*task, i int, outstanding map[string]int, f *flight) bool {
	t := tasks[i]
	if outstanding[t.a.From] >= 1+e.cfg.QueuePerHost {
		return false
	}
	if f.unproven(tasks, i) {
		return false // its destination's word is not checked yet (liar.go)
	}
	for _, o := range tasks {
		if o.step >= t.step {
			break
		}
		if !o.accepted {
			return false // an earlier step is not in Nova's hands yet
		}
		if !o.ended && o.a.From == t.a.To {
			return false // still freeing room on t's destination
		}
	}
	return true
}

func (e *Executor) runTask(ctx context.Context, ev scheduler.Event, i int, a scheduler.Action, f *flight, reports chan<- progress) {
	r := e.run(ctx, ev, a, f, func() { reports <- progress{i: i, accepted: true} })
	reports <- progress{i: i, res: &r}
}

func (e *Executor) run(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight, accepted func()) ActionResult {
	if ev.Kind == scheduler.Maintenance && a.Kind == scheduler.LiveMigrate {
		return e.drainServer(ctx, ev, a, f, accepted) // maint.go
	}
	return e.runOne(ctx, ev, a, f, accepted, nil)
}

// runOne runs one action: re-check, grant, request, follow. choose, if
// set, picks the action's kind from the server the re-check read (a
// drain's maintenance actions, maint.go).
func (e *Executor) runOne(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight, accepted func(), choose func(nova.Server) scheduler.ActionKind) ActionResult {
	r := ActionResult{Action: a}
	log := e.log.With().Str("event", ev.ID).Str("server", a.Server).Str("from", a.From).Str("action", a.Kind.String()).Str("dest", a.To).Logger()
	if sk := e.controlled(a); sk.why != "" {
		r.Outcome, r.Class, r.Reason = ActionSkipped, sk.class, sk.why
		log.Info().Str("reason", sk.why).Msg("action skipped: operator control")
		return r
	}
	if sk := e.distrusted(a); sk.why != "" {
		r.Outcome, r.Class, r.Reason = ActionSkipped, sk.class, sk.why
		log.Info().Str("reason", sk.why).Msg("action skipped: destination distrusted")
		return r
	}
	if sk := f.refusedBy(a.From); sk.why != "" {
		r.Outcome, r.Class, r.Reason = ActionSkipped, sk.class, sk.why
		log.Info().Str("reason", sk.why).Msg("action skipped: its source host's agent refused this plan a grant")
		return r
	}
	baseline, held, sk, srv := e.recheck(ctx, ev, a, f)
	if sk.class == ReasonDestinationImplausible {
		e.noteImplausible(a.To, sk.why)
	}
	if sk.why != "" {
		r.Outcome, r.Class, r.Reason = ActionSkipped, sk.class, sk.why
		log.Info().Str("reason", sk.why).Str("class", string(sk.class)).Msg("action skipped after re-check")
		return r
	}
	defer func() { f.settle(held, r) }()
	if choose != nil {
		if a.Kind = choose(srv); a.Kind != scheduler.LiveMigrate && a.Kind != scheduler.ColdMigrate {
			f.settle(held, ActionResult{Outcome: ActionSkipped}) // nothing arrives on the destination
			held, a.To = nil, ""
		}
		r.Action = a
		log = e.log.With().Str("event", ev.ID).Str("server", a.Server).Str("from", a.From).Str("action", a.Kind.String()).Str("dest", a.To).Logger()
		if a.Kind == scheduler.Notify {
			r.Outcome, r.Class, r.Reason = ActionSkipped, ReasonLeftForOwner, "left on "+a.From+" for its owner (maintenance action notify)"
			log.Warn().Msg("drain: server left on its host for its owner (maintenance action notify)")
			return r
		}
	}
	if e.adviseIn(ctx, a) {
		r.Outcome, r.Class, r.Reason = ActionSkipped, ReasonAdvise, "advise mode: not executed"
		log.Info().Msg("advise: would run action")
		return r
	}
	if err := ctx.Err(); err != nil {
		r.Outcome, r.Class, r.Reason = ActionSkipped, ReasonStopping, "stopping: "+err.Error()
		return r
	}
	callCtx, release, sk := e.granted(ctx, ev, a, f, &r)
	defer release()
	if sk.why != "" {
		r.Outcome, r.Class, r.Reason = ActionSkipped, sk.class, sk.why
		log.Warn().Str("reason", sk.why).Str("class", string(sk.class)).Msg("action skipped: not granted by its source host's agent")
		return r
	}
	if a.Kind == scheduler.Shelve {
		// Mark it first: only servers dvms shelved are unshelved by dvms
		// (Reviver). Without the mark, no shelve.
		if err := e.nova.SetServerMetadata(ctx, a.Server, nova.MetaShelved, ev.ID); err != nil {
			r.Outcome, r.Class, r.Reason = ActionFailed, ReasonFailed, "mark before shelving: "+err.Error()
			log.Warn().Err(err).Msg("action failed: server not marked, not shelved")
			return r
		}
	}
	start := e.clock.Now()
	rc, err := e.call(callCtx, a)
	r.Receipt = rc
	if err != nil {
		r.Outcome, r.Class, r.Reason = ActionFailed, ReasonFailed, err.Error()
		if errors.Is(err, nova.ErrConflict) {
			r.Outcome, r.Class = ActionSkipped, ReasonConflict // the server got busy: nothing was done
		}
		log.Warn().Err(err).Msg("action refused by nova")
		if a.Kind == scheduler.Shelve {
			// Not shelved: take the mark back (best effort; an ACTIVE
			// server's mark is never acted on).
			_ = e.nova.SetServerMetadata(ctx, a.Server, nova.MetaShelved, "")
		}
		return r
	}
	f.accept(held)
	accepted()
	log.Info().Str("request_id", rc.GlobalRequestID).Str("nova_request_id", rc.LocalRequestID).Msg("action accepted by nova")
	mf := &migFollow{requested: start}
	err = e.follow(ctx, a, baseline, mf, log)
	e.learn(a, mf, err)
	if err != nil {
		r.Outcome, r.Class, r.Reason = ActionFailed, ReasonFailed, err.Error()
		switch {
		case mf.aborted && !errors.Is(err, nova.ErrTimeout) && !errors.Is(err, nova.ErrUnavailable):
			r.Class = ReasonMigrationAborted
			r.Reason = fmt.Sprintf("%s by dvms (%s): %s; %s", CompleteAbort, mf.verdict, err, e.afterAbort(ctx, a, log))
		case errors.Is(err, nova.ErrTimeout) || errors.Is(err, nova.ErrUnavailable):
			r.Class = ReasonTimeout // no end in time, or outcome unknown
		}
		if mf.forced {
			r.Reason += " (forced to complete: " + mf.verdict + ")"
		}
		log.Warn().Err(err).Str("class", string(r.Class)).Msg("action failed")
		return r
	}
	r.Outcome, r.Class = ActionDone, ReasonNone
	if mf.forced {
		r.Class, r.Reason = ReasonForceCompleted, "force_complete by dvms: "+mf.verdict
	}
	log.Info().Dur("took", e.clock.Now().Sub(start)).Str("class", string(r.Class)).Msg("action done")
	if a.Kind == scheduler.LiveMigrate {
		e.crossCheck(ctx, a, f)
	}
	if a.Kind == scheduler.Shelve && e.OnShelved != nil {
		e.OnShelved(a.Server)
	}
	return r
}

// controlled says why the operator's controls hold a back ("" when they
// do not).
func (e *Executor) controlled(a scheduler.Action) skip {
	c := e.Controls
	switch {
	case c == nil:
	case c.Paused():
		return skip{ReasonPaused, "region paused by the operator (dvms resume)"}
	case c.Excluded(a.From):
		return skip{ReasonExcluded, a.From + " is excluded by the operator (dvms include)"}
	case a.To != "" && c.Excluded(a.To):
		return skip{ReasonExcluded, a.To + " is excluded by the operator (dvms include)"}
	}
	return skip{}
}

// advise: a is re-checked and recorded, not sent (advise mode).
func (e *Executor) advise(a scheduler.Action) bool {
	if c := e.Controls; c != nil {
		return c.Advise(a.From) || (a.To != "" && c.Advise(a.To))
	}
	return e.cfg.DryRun
}

// recheck re-reads Nova right before an action, within RecheckTimeout,
// and says why it no longer holds ("" when it does); when it holds, the
// action's load is reserved on its destination (release gives it back)
// and baseline holds the server's migrations known before the action, so
// following it never depends on the agent's clock against Nova's.
func (e *Executor) recheck(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight) (baseline map[string]bool, held *reservation, sk skip, s nova.Server) {
	ctx, cancel := context.WithTimeout(ctx, e.wall(e.stretched(e.cfg.RecheckTimeout)))
	defer cancel()
	// Every read at once: on a busy nova-api the re-check costs one
	// round trip, not seven (it is on the path of a drain's first move).
	r := e.readAll(ctx, ev, a, f)
	baseline, held, sk = judge(e.thr, a, f, r)
	return baseline, held, sk, r.server
}

// judge is a re-check's verdict on what it read (r): a step function,
// no I/O and no clock, shared by the executor and the virtual clock
// (PlanCheck). When the action runs, its load is reserved in f.
func judge(thr scheduler.Thresholds, a scheduler.Action, f *flight, r *reads) (baseline map[string]bool, held *reservation, sk skip) {
	if r.decided {
		return nil, nil, r.reason // before any Nova read
	}
	s, err := r.server, r.serverErr
	if err != nil {
		return nil, nil, skip{ReasonReadFailed, "server re-read failed: " + err.Error()}
	}
	if s.Host != a.From || s.Status != nova.StatusActive || s.TaskState != "" {
		return nil, nil, skipf(ReasonServerChanged, "server is now %s on %q (task %q)", s.Status, s.Host, s.TaskState)
	}
	if s.Locked {
		return nil, nil, skipf(ReasonServerChanged, "server is locked")
	}
	if r.reason.why != "" {
		return nil, nil, r.reason
	}
	if r.consent.why != "" {
		return nil, nil, r.consent // the source host did not consent (consent.go)
	}
	if !moves(a.Kind) {
		return nil, nil, skip{}
	}
	if s.Group != nil && s.Group.Policy == nova.PolicyAffinity {
		return nil, nil, skip{ReasonServerGroup, "server is in affinity group " + s.Group.Name + ": it moves with its group only"}
	}
	if r.migrationsErr != nil {
		return nil, nil, skip{ReasonReadFailed, "migrations re-read failed: " + r.migrationsErr.Error()}
	}
	baseline = map[string]bool{}
	for _, m := range r.migrations {
		if !m.Terminal() {
			return nil, nil, skipf(ReasonServerChanged, "server has migration %s %s in progress", m.ID, m.Status)
		}
		baseline[m.ID] = true
	}
	h, err := r.dest, r.destErr
	if err != nil {
		return nil, nil, skip{ReasonReadFailed, "destination re-read failed: " + err.Error()}
	}
	if h.Service.Disabled() || h.Service.State == nova.ServiceDown || h.Service.ForcedDown {
		return nil, nil, skip{ReasonDestinationDisabled, "destination is " + h.Service.Status + "/" + h.Service.State}
	}
	servers, err := r.destServers, r.destServersErr
	if err != nil {
		return nil, nil, skip{ReasonReadFailed, "destination servers re-read failed: " + err.Error()}
	}
	if r.srcDemandErr != nil {
		return nil, nil, skip{ReasonReadFailed, "source demand: " + r.srcDemandErr.Error()}
	}
	if r.destDemandErr != nil {
		return nil, nil, skip{ReasonReadFailed, "destination demand: " + r.destDemandErr.Error()}
	}
	if sk := f.implausible(a.To, servers, r.destDemand); sk.why != "" {
		return nil, nil, sk // its word is implausibly low against its flavors (liar.go)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// The server's demand as the plan last read it (this re-check read
	// its source and the destination), else as the plan saw it; the
	// destination's likewise, server by server.
	mine := nova.Demand{CPU: a.CPU, RAMMB: a.RAM}
	if v, ok := f.read[a.Server]; ok {
		mine = v
	}
	if g := s.Group; g != nil && g.Policy == nova.PolicyAntiAffinity {
		for _, o := range servers {
			if o.Group != nil && o.Group.ID == g.ID && o.ID != s.ID {
				return nil, nil, skipf(ReasonServerGroup, "anti-affinity group %s already has %s on the destination", g.Name, o.ID)
			}
		}
		if f.groups[a.To][g.ID] > 0 {
			return nil, nil, skipf(ReasonServerGroup, "anti-affinity group %s has a member moving to the destination", g.Name)
		}
	}
	listedVCPUs, listedRAM := flavorUsage(servers)
	listed := make(map[string]bool, len(servers))
	for _, sv := range servers {
		listed[sv.ID] = true
	}
	in, accepted := f.arriving(a.To, listed, f.read)
	// Placement holds a moving server on both hosts: allocations on the
	// destination beyond its listed servers and the moves of this plan
	// still on their way are migrations from elsewhere (a partition that
	// lost this host): do not pile on. A move of this plan that completed
	// is listed, so it cannot hide one from elsewhere.
	if foreign := h.VCPUsUsed - listedVCPUs - accepted; foreign > 0 {
		return nil, nil, skipf(ReasonDestinationBusy, "destination has %d VCPU of migrations in progress from elsewhere", foreign)
	}
	// What the destination carries now: its listed servers (their demand
	// as the plan last read it; a server it has no reading of yet — one
	// that just arrived — at what the plan knows of it, see unread) and
	// the moves of this plan on their way in.
	var used fit.Use
	for _, sv := range servers {
		d, ok := f.read[sv.ID]
		if !ok {
			d = f.unread(a.To, sv)
		}
		d = f.floor(sv.ID, d) // a server this plan moved in: no less than it carried
		used = used.Plus(fit.Use{CPU: d.CPU, RAM: d.RAMMB})
	}
	used = used.Plus(fit.Use{CPU: in.cpu, RAM: in.ram, VCPUs: float64(listedVCPUs + in.vcpus), RAMMB: float64(listedRAM + in.ramMB)})
	add := fit.Use{CPU: mine.CPU, RAM: mine.RAMMB, VCPUs: float64(a.VCPUs), RAMMB: float64(a.RAMMB)}
	lim := fit.HostLimit(float64(h.VCPUs), float64(h.RAMMB), thr.CPUOverload, thr.RAMOverload, h.AllocatableVCPUs(), h.AllocatableRAMMB())
	switch p := fit.Check(used, add, lim); {
	case p == fit.None:
	case p.Demand():
		t := used.Plus(add)
		return nil, nil, skipf(ReasonOverload, "destination would be overloaded (%s: cpu %.1f/%.1f, ram %.0f/%.0f)", p, t.CPU, lim.CPU, t.RAM, lim.RAM)
	default:
		return nil, nil, skipf(ReasonPlacement, "destination placement capacity no longer fits (%s: %d+%d+%d VCPU of %.0f)", p, listedVCPUs, in.vcpus, a.VCPUs, h.AllocatableVCPUs())
	}
	held = &reservation{to: a.To, server: a.Server, l: load{cpu: mine.CPU, ram: mine.RAMMB, vcpus: a.VCPUs, ramMB: a.RAMMB}}
	if f.flying[a.To] == nil {
		f.flying[a.To] = map[string]*reservation{}
	}
	f.flying[a.To][a.Server] = held
	f.carry(a.Server, mine)
	if s.Group != nil {
		held.group = s.Group.ID
		if f.groups[a.To] == nil {
			f.groups[a.To] = map[string]int{}
		}
		f.groups[a.To][held.group]++
	}
	return baseline, held, skip{}
}

// reads is what a re-check reads, all at once.
type reads struct {
	server                      nova.Server
	serverErr                   error
	reason                      skip
	decided                     bool // reason decided before any Nova read, nothing else read
	migrations                  []nova.Migration
	migrationsErr               error
	dest                        nova.Host
	destErr                     error
	destServers                 []nova.Server
	destServersErr              error
	srcDemand, destDemand       map[string]nova.Demand
	srcDemandErr, destDemandErr error
	// consent: the source host's consent (consent.go), from src (Nova's
	// view of the source, read while it is not known) and srcDemand.
	consent skip
	src     nova.Host
	srcErr  error
}

// readAll runs the re-check's reads concurrently (a shelve needs only the
// server and the reason).
func (e *Executor) readAll(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight) *reads {
	r := &reads{}
	// A source that already refused consent costs Nova nothing more.
	cons, consKnown := f.consentKnown(ev, a.From)
	if consKnown && cons.why != "" {
		r.reason, r.decided = cons, true
		return r
	}
	// The event's verdict first when it needs no Nova read (kept for the
	// plan, or its host's agent did not answer): an action skipped for it
	// costs Nova nothing. Else its Nova reads go with the others.
	why, known, d := e.reasonFirst(ctx, ev, f)
	if known && why.why != "" {
		r.reason, r.decided = why, true
		return r
	}
	var wg sync.WaitGroup
	do := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	do(func() {
		r.server, r.serverErr = retry(ctx, e, func() (nova.Server, error) { return e.nova.Server(ctx, a.Server) })
	})
	if !known {
		do(func() { r.reason = e.reasonHolds(ctx, ev, d, f) })
	}
	if moves(a.Kind) {
		do(func() {
			r.migrations, r.migrationsErr = retry(ctx, e, func() ([]nova.Migration, error) { return e.nova.Migrations(ctx, a.Server) })
		})
		do(func() { r.dest, r.destErr = retry(ctx, e, func() (nova.Host, error) { return e.nova.Host(ctx, a.To) }) })
		do(func() {
			r.destServers, r.destServersErr = retry(ctx, e, func() ([]nova.Server, error) { return e.nova.Servers(ctx, a.To) })
		})
		do(func() { r.destDemand, r.destDemandErr = e.measureIn(ctx, f, a.To) })
	}
	if moves(a.Kind) || !consKnown {
		do(func() { r.srcDemand, r.srcDemandErr = e.measureIn(ctx, f, a.From) })
	}
	if !consKnown {
		e.consentReads(ctx, a.From, r, do)
	}
	wg.Wait()
	r.consent = cons
	if !consKnown {
		r.consent = consentVerdict(e.thr, e.DrainReason, a.From, r.src, r.srcErr, r.srcDemand)
		f.keepConsent(a.From, r.consent)
	}
	return r
}

// reservation is what a re-checked live migration holds on its
// destination until it ends.
type reservation struct {
	to, server string
	l          load
	group      string
	accepted   bool
}

// askTries is how many times measure asks a host's agent for its demand
// before it is unknown (the runner's query itself is sent up to three
// times, 3.5 s in all).
const askTries = 2

// measure is host's demand now: from the local source, else from the
// host's agent (Ask; an error when it does not answer); nil, nil when
// there is no agent to ask (the plan's snapshot answers then).
func (e *Executor) measure(ctx context.Context, host string) (map[string]nova.Demand, error) {
	if e.demand != nil {
		d, err := e.demand.Demand(ctx, host)
		if !errNotMeasured(err) {
			return d, err
		}
	}
	if e.Ask != nil {
		// The host's agent measures it; when it does not answer, its
		// demand now is unknown: the plan's snapshot may be stale, so the
		// move is skipped rather than risk overloading a host. It is
		// asked again before that (askTries): an answer late by a moment
		// (a busy agent, a busy bus) is not a reason to give up a plan.
		var err error
		for range askTries {
			var d map[string]nova.Demand
			if d, err = e.Ask(ctx, host); err == nil {
				return d, nil
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, fmt.Errorf("unknown now: %w", err)
	}
	return nil, nil // no agent to ask (tools, tests): the plan's snapshot
}

// measureIn is measure for a re-check of the plan flying f: what it
// reads is noted as the plan's latest reading (flight.read), which every
// re-check of the plan judges by.
func (e *Executor) measureIn(ctx context.Context, f *flight, host string) (map[string]nova.Demand, error) {
	d, err := e.measure(ctx, host)
	if err == nil {
		f.note(d)
	}
	return d, err
}

// accept notes that Nova accepted the reserved move (nil: not a move).
func (f *flight) accept(h *reservation) {
	if h == nil {
		return
	}
	f.mu.Lock()
	h.accepted = true
	f.mu.Unlock()
}

// settle is called once the reserved action ended with res. A move that
// did not happen gives back what recheck reserved. A move done (or whose
// outcome is unknown: it may have happened) keeps its reservation for the
// rest of the plan: later re-checks count it where their listing of the
// destination does not show the server (arriving). A re-check whose
// listing was read while the move still ran, and that takes the flight
// after the move ended, would otherwise count the server nowhere: with
// the reservation given back at the end, such a re-check let a plan
// moving servers from several hosts into one start a move into a full
// destination (a plan-overloads-destination violation in about one
// saturated 200-host run in ten, with no demand changed).
func (f *flight) settle(h *reservation, res ActionResult) {
	if h == nil {
		return
	}
	if res.Outcome == ActionDone || res.Outcome == ActionFailed && res.Class == ReasonTimeout {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.flying[h.to], h.server)
	if h.group != "" {
		f.groups[h.to][h.group]--
	}
}

func (l *load) add(o load, sign int) {
	l.cpu += float64(sign) * o.cpu
	l.ram += float64(sign) * o.ram
	l.vcpus += sign * o.vcpus
	l.ramMB += sign * o.ramMB
}

// ObserveLatency feeds the latency of one successful Nova read into the
// executor's measure (see ExecConfig.RecheckTimeout); the runner's
// monitor feeds its reads too.
func (e *Executor) ObserveLatency(d time.Duration) {
	for {
		old := e.lat.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/4
		}
		if e.lat.CompareAndSwap(old, next) {
			return
		}
	}
}

// stretched is d, or 3 × the measured read latency when longer, at most
// 3 × d.
func (e *Executor) stretched(d time.Duration) time.Duration {
	return min(max(d, 3*time.Duration(e.lat.Load())), 3*d)
}

// retry calls a read with bounded backoff on nova.ErrUnavailable; a read
// that answers feeds the latency measure.
func retry[T any](ctx context.Context, e *Executor, f func() (T, error)) (T, error) {
	backoff := e.cfg.Backoff
	for i := 0; ; i++ {
		start := e.clock.Now()
		v, err := f()
		if err == nil {
			e.ObserveLatency(e.clock.Now().Sub(start))
		}
		if err == nil || !errors.Is(err, nova.ErrUnavailable) || i >= e.cfg.Retries {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-e.clock.After(backoff):
		}
		backoff *= 2
	}
}

func (e *Executor) call(ctx context.Context, a scheduler.Action) (nova.Receipt, error) {
	switch a.Kind {
	case scheduler.LiveMigrate:
		return e.nova.LiveMigrate(ctx, a.Server, a.To)
	case scheduler.Shelve:
		return e.nova.Shelve(ctx, a.Server)
	case scheduler.ColdMigrate:
		return e.coldMigrate(ctx, a)
	}
	return nova.Receipt{}, fmt.Errorf("unsupported action %s", a.Kind)
}

// follow waits for the action to end: MigrationTimeout in all, and at
// most Unresponsive without one successful status read. A live
// migration is followed from Nova's in-progress listing (its memory
// progress, for the completion policy, mf), one request per Poll; when
// the listing no longer (or does not yet) shows it, os-migrations says
// how it ended: one more request at its start and at its end.
func (e *Executor) follow(ctx context.Context, a scheduler.Action, baseline map[string]bool, mf *migFollow, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, e.wall(e.cfg.MigrationTimeout))
	defer cancel()
	readTimeout := e.cfg.ReadTimeout
	if readTimeout <= 0 {
		readTimeout = 30 * time.Second
	}
	readTimeout = e.stretched(readTimeout)
	offloaded := false
	lastOK := e.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", a.Kind, a.Server, nova.ErrTimeout)
		case <-e.clock.After(e.cfg.Poll):
		}
		done, ok, err := e.poll(ctx, a, baseline, readTimeout, &offloaded, mf, log)
		if done {
			return err
		}
		if ok {
			lastOK = e.clock.Now()
		} else if since := e.clock.Now().Sub(lastOK); since >= e.cfg.Unresponsive {
			return fmt.Errorf("%s %s: no status from nova for %s, outcome unknown (see the server's migration list): %w", a.Kind, a.Server, since.Round(time.Second), nova.ErrUnavailable)
		}
	}
}

// poll reads the state of a followed action once, within readTimeout;
// done reports that the action ended (err says how), ok that the read
// succeeded. offloaded notes the follow-up request was sent (a shelve's
// offload, a cold migration's confirmation).
func (e *Executor) poll(ctx context.Context, a scheduler.Action, baseline map[string]bool, readTimeout time.Duration, offloaded *bool, mf *migFollow, log zerolog.Logger) (done, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.wall(readTimeout))
	defer cancel()
	switch a.Kind {
	case scheduler.LiveMigrate:
		start := e.clock.Now()
		// A listing that fails (a 5xx, or a policy without
		// os_compute_api:servers:migrations:index) falls back to
		// os-migrations at once: the migration is still followed, without
		// its progress.
		ps, err := e.nova.MigrationsInProgress(ctx, a.Server)
		if err == nil {
			e.ObserveLatency(e.clock.Now().Sub(start))
		}
		for _, p := range ps {
			if !baseline[p.ID] && (mf.mid == "" || p.ID == mf.mid) {
				e.progress(ctx, a, mf, p, log)
				return false, true, nil
			}
		}
		ms, err := e.nova.Migrations(ctx, a.Server)
		if err != nil {
			return false, false, nil
		}
		// The migration this action created: the newest one not known
		// before it (Migrations lists newest first).
		for _, m := range ms {
			if baseline[m.ID] {
				continue
			}
			if !m.Terminal() {
				return false, true, nil
			}
			if m.Succeeded() && m.Dest == a.To {
				return true, true, nil
			}
			return true, true, fmt.Errorf("live-migrate %s to %s: migration %s ended %s (dest %q)", a.Server, a.To, m.ID, m.Status, m.Dest)
		}
		return false, true, nil // not listed yet
	case scheduler.Shelve:
		s, err := e.nova.Server(ctx, a.Server)
		if err != nil {
			return false, false, nil
		}
		switch {
		case s.Status == nova.StatusShelvedOffloaded:
			return true, true, nil
		case s.Status == nova.StatusShelved && s.TaskState == "" && !*offloaded:
			if _, err := e.nova.ShelveOffload(ctx, a.Server); err == nil {
				*offloaded = true
			}
		case s.Status == nova.StatusError:
			return true, true, fmt.Errorf("shelve %s: server in ERROR", a.Server)
		}
		return false, true, nil
	case scheduler.ColdMigrate:
		return e.pollCold(ctx, a, baseline, offloaded, log)
	}
	return true, true, fmt.Errorf("unsupported action %s", a.Kind)
}

// learn feeds the estimator what a's migration showed (mf; err: how it
// ended).
func (e *Executor) learn(a scheduler.Action, mf *migFollow, err error) {
	if e.Estimator == nil || a.Kind != scheduler.LiveMigrate || errors.Is(err, nova.ErrTimeout) || errors.Is(err, nova.ErrUnavailable) {
		return
	}
	e.Estimator.Observe(mf.observation(a, e.clock.Now(), err == nil))
}

// afterAbort re-reads the server after dvms aborted its migration and
// says where it is: ACTIVE on its source, or what else (logged loudly:
// an operator looks at it).
func (e *Executor) afterAbort(ctx context.Context, a scheduler.Action, log zerolog.Logger) string {
	s, err := retry(ctx, e, func() (nova.Server, error) { return e.nova.Server(ctx, a.Server) })
	switch {
	case err != nil:
		log.Error().Err(err).Msg("aborted live migration: server re-read failed, its state is unknown")
		return "server re-read failed: " + err.Error()
	case s.Host == a.From && s.Status == nova.StatusActive:
		log.Info().Msg("aborted live migration: server ACTIVE on its source")
		return fmt.Sprintf("server %s on %s (its source)", s.Status, s.Host)
	}
	log.Error().Str("status", s.Status).Str("host", s.Host).Str("task_state", s.TaskState).Msg("aborted live migration: server not ACTIVE on its source")
	return fmt.Sprintf("server %s on %q (task %q), not ACTIVE on its source %s", s.Status, s.Host, s.TaskState, a.From)
}

// wall converts a duration of the executor's clock to wall time.
func (e *Executor) wall(d time.Duration) time.Duration {
	if s, ok := e.clock.(*Scaled); ok {
		return s.Wall(d)
	}
	return d
}
