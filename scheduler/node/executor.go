package node

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
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
	// RecheckTimeout bounds the whole re-check of one action (all its reads).
	RecheckTimeout time.Duration
	// Unresponsive: a followed action whose status reads all failed for
	// this long ends as failed (outcome unknown, recorded), so a hung Nova
	// does not hold the partition for MigrationTimeout.
	Unresponsive time.Duration
	// Retries of a call that failed with nova.ErrUnavailable (5xx,
	// connection), spaced by Backoff doubling each time.
	Retries int
	Backoff time.Duration
	// DryRun (advise mode) re-checks and records every action but sends
	// nothing to Nova.
	DryRun bool
}

// DefaultExecConfig returns 10 min per action, 2 s polls, 3 retries.
func DefaultExecConfig() ExecConfig {
	return ExecConfig{MigrationTimeout: 10 * time.Minute, Poll: time.Second, Retries: 3, Backoff: time.Second,
		QueuePerHost: 1, RecheckTimeout: 20 * time.Second, Unresponsive: time.Minute}
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
	return errors.Join(errs...)
}

// ActionResult is what happened to one action.
type ActionResult struct {
	Action  scheduler.Action
	Outcome string // done | skipped | failed
	Reason  string
	Receipt nova.Receipt
}

// ExecResult sums up a plan's execution.
type ExecResult struct {
	Actions []ActionResult
	Done    int
	Skipped int
	Failed  int
}

// Executor runs plans against Nova (DESIGN §5.5): before each action it
// re-reads the server and the destination and skips what no longer
// holds; it follows each action to its end; a failed step cancels the
// steps after it.
type Executor struct {
	cfg    ExecConfig
	nova   nova.Client
	demand nova.DemandSource // optional: destination demand re-check
	thr    scheduler.Thresholds
	clock  Clock
	log    zerolog.Logger
	// OnAction, if set, is called after every action (metrics).
	OnAction func(ActionResult)
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

// Execute runs the plan for ev and returns what happened. It stops after
// the first step with a failed action: later steps may depend on the room
// that action was to free.
func (e *Executor) Execute(ctx context.Context, ev scheduler.Event, plan scheduler.Plan) ExecResult {
	ctx = nova.WithRequestID(ctx, RequestID(ev.ID))
	var out ExecResult
	for i, step := range plan.Steps {
		results := make([]ActionResult, len(step))
		incoming := &incoming{cpu: map[string]float64{}, ram: map[string]float64{}, vcpus: map[string]int{}}
		var wg sync.WaitGroup
		for j, a := range step {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[j] = e.run(ctx, ev, a, incoming)
				if e.OnAction != nil {
					e.OnAction(results[j])
				}
			}()
		}
		wg.Wait()
		stop := false
		for _, r := range results {
			out.Actions = append(out.Actions, r)
			switch r.Outcome {
			case "done":
				out.Done++
			case "skipped":
				out.Skipped++
			default:
				out.Failed++
				stop = true
			}
		}
		if stop || ctx.Err() != nil {
			for _, rest := range plan.Steps[i+1:] {
				for _, a := range rest {
					out.Actions = append(out.Actions, ActionResult{Action: a, Outcome: "skipped", Reason: "cancelled: an earlier action failed"})
					out.Skipped++
				}
			}
			break
		}
	}
	return out
}

// incoming tracks demand moving into each destination during one step,
// so parallel re-checks count each other.
type incoming struct {
	mu       sync.Mutex
	cpu, ram map[string]float64
	vcpus    map[string]int
}

func (e *Executor) run(ctx context.Context, ev scheduler.Event, a scheduler.Action, in *incoming) ActionResult {
	r := ActionResult{Action: a}
	log := e.log.With().Str("event", ev.ID).Str("server", a.Server).Str("from", a.From).Str("action", a.Kind.String()).Str("dest", a.To).Logger()
	if why := e.recheck(ctx, a, in); why != "" {
		r.Outcome, r.Reason = "skipped", why
		log.Info().Str("reason", why).Msg("action skipped after re-check")
		return r
	}
	if e.cfg.DryRun {
		r.Outcome, r.Reason = "skipped", "advise mode: not executed"
		log.Info().Msg("advise: would run action")
		return r
	}
	if err := ctx.Err(); err != nil {
		r.Outcome, r.Reason = "skipped", "stopping: "+err.Error()
		return r
	}
	if a.Kind == scheduler.Shelve {
		// Mark it first: only servers dvms shelved are unshelved by dvms
		// (Reviver). Without the mark, no shelve.
		if err := e.nova.SetServerMetadata(ctx, a.Server, nova.MetaShelved, ev.ID); err != nil {
			r.Outcome, r.Reason = "failed", "mark before shelving: "+err.Error()
			log.Warn().Err(err).Msg("action failed: server not marked, not shelved")
			return r
		}
	}
	start := e.clock.Now()
	rc, err := e.call(ctx, a)
	r.Receipt = rc
	if err != nil {
		r.Outcome, r.Reason = "failed", err.Error()
		if errors.Is(err, nova.ErrConflict) {
			r.Outcome = "skipped" // the server got busy: nothing was done
		}
		log.Warn().Err(err).Msg("action refused by nova")
		if a.Kind == scheduler.Shelve {
			// Not shelved: take the mark back (best effort; an ACTIVE
			// server's mark is never acted on).
			_ = e.nova.SetServerMetadata(ctx, a.Server, nova.MetaShelved, "")
		}
		return r
	}
	log.Info().Str("request_id", rc.GlobalRequestID).Str("nova_request_id", rc.LocalRequestID).Msg("action accepted by nova")
	if err := e.follow(ctx, a, start); err != nil {
		r.Outcome, r.Reason = "failed", err.Error()
		log.Warn().Err(err).Msg("action failed")
		return r
	}
	r.Outcome = "done"
	log.Info().Dur("took", e.clock.Now().Sub(start)).Msg("action done")
	return r
}

// recheck re-reads Nova right before an action and says why it no longer
// holds ("" when it does).
func (e *Executor) recheck(ctx context.Context, a scheduler.Action, in *incoming) string {
	s, err := retry(ctx, e, func() (nova.Server, error) { return e.nova.Server(ctx, a.Server) })
	if err != nil {
		return "server re-read failed: " + err.Error()
	}
	if s.Host != a.From || s.Status != nova.StatusActive || s.TaskState != "" {
		return fmt.Sprintf("server is now %s on %q (task %q)", s.Status, s.Host, s.TaskState)
	}
	if a.Kind != scheduler.LiveMigrate {
		return ""
	}
	h, err := retry(ctx, e, func() (nova.Host, error) { return e.nova.Host(ctx, a.To) })
	if err != nil {
		return "destination re-read failed: " + err.Error()
	}
	if h.Service.Disabled() || h.Service.State == nova.ServiceDown {
		return "destination is " + h.Service.Status + "/" + h.Service.State
	}
	// Placement holds a moving server on both hosts: allocations on the
	// destination beyond its listed servers are migrations coming in. Any
	// not started by this step come from elsewhere (a partition that lost
	// this host): do not pile on.
	servers, err := retry(ctx, e, func() ([]nova.Server, error) { return e.nova.Servers(ctx, a.To) })
	if err != nil {
		return "destination servers re-read failed: " + err.Error()
	}
	listed := 0
	for _, s := range servers {
		listed += s.VCPUs
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if foreign := h.VCPUsUsed - listed - in.vcpus[a.To]; foreign > 0 {
		return fmt.Sprintf("destination has %d VCPU of migrations in progress from elsewhere", foreign)
	}
	if float64(h.VCPUsUsed+a.VCPUs) > h.AllocatableVCPUs()+1e-9 || float64(h.RAMMBUsed+a.RAMMB) > h.AllocatableRAMMB()+1e-9 {
		return "destination placement capacity no longer fits"
	}
	mine := nova.Demand{CPU: a.CPU, RAMMB: a.RAM}
	if e.demand != nil {
		// The server's demand now, not as the plan saw it.
		srcDemand, err := e.demand.Demand(ctx, a.From)
		if err != nil {
			return "source demand unknown: " + err.Error()
		}
		if d, ok := srcDemand[a.Server]; ok {
			mine = d
		}
		d, err := e.demand.Demand(ctx, a.To)
		if err != nil {
			return "destination demand unknown: " + err.Error()
		}
		// Only the servers Nova lists on the destination count: a source
		// may answer for more than one host (a shared file).
		var cpu, ram float64
		for _, s := range servers {
			if v, ok := d[s.ID]; ok {
				cpu += v.CPU
				ram += v.RAMMB
			} else {
				ram += float64(s.RAMMB) // unknown demand: the flavor's RAM, as ToHost
			}
		}
		cpu += in.cpu[a.To] + mine.CPU
		ram += in.ram[a.To] + mine.RAMMB
		if cpu > float64(h.VCPUs)*e.thr.CPUOverload+1e-9 || ram > float64(h.RAMMB)*e.thr.RAMOverload+1e-9 {
			return fmt.Sprintf("destination would be overloaded (cpu %.1f/%d, ram %.0f/%d)", cpu, h.VCPUs, ram, h.RAMMB)
		}
	}
	in.cpu[a.To] += mine.CPU
	in.ram[a.To] += mine.RAMMB
	in.vcpus[a.To] += a.VCPUs
	return ""
}

// retry calls a read with bounded backoff on nova.ErrUnavailable.
func retry[T any](ctx context.Context, e *Executor, f func() (T, error)) (T, error) {
	backoff := e.cfg.Backoff
	for i := 0; ; i++ {
		v, err := f()
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
	case scheduler.Unshelve:
		return e.nova.Unshelve(ctx, a.Server, a.To)
	}
	return nova.Receipt{}, fmt.Errorf("unknown action %s", a.Kind)
}

// follow waits for the action to end.
func (e *Executor) follow(ctx context.Context, a scheduler.Action, start time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, e.wall(e.cfg.MigrationTimeout))
	defer cancel()
	readTimeout := e.cfg.ReadTimeout
	if readTimeout <= 0 {
		readTimeout = 30 * time.Second
	}
	offloaded := false
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", a.Kind, a.Server, nova.ErrTimeout)
		case <-e.clock.After(e.cfg.Poll):
		}
		if done, err := e.poll(ctx, a, start, readTimeout, &offloaded); done {
			return err
		}
	}
}

// poll reads the state of a followed action once, within readTimeout; done
// reports that the action ended (err says how).
func (e *Executor) poll(ctx context.Context, a scheduler.Action, start time.Time, readTimeout time.Duration, offloaded *bool) (done bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.wall(readTimeout))
	defer cancel()
	switch a.Kind {
	case scheduler.LiveMigrate:
		ms, err := e.nova.Migrations(ctx, a.Server)
		if err != nil {
			return false, nil // transient: keep following until the timeout
		}
		for _, m := range ms {
			if m.CreatedAt.Before(start.Add(-time.Second)) || m.Dest != a.To {
				continue
			}
			if !m.Terminal() {
				return false, nil
			}
			if m.Succeeded() {
				return true, nil
			}
			return true, fmt.Errorf("live-migrate %s to %s: migration %s ended %s", a.Server, a.To, m.ID, m.Status)
		}
	case scheduler.Shelve:
		s, err := e.nova.Server(ctx, a.Server)
		if err != nil {
			return false, nil
		}
		switch {
		case s.Status == nova.StatusShelvedOffloaded:
			return true, nil
		case s.Status == nova.StatusShelved && s.TaskState == "" && !*offloaded:
			if _, err := e.nova.ShelveOffload(ctx, a.Server); err == nil {
				*offloaded = true
			}
		case s.Status == nova.StatusError:
			return true, fmt.Errorf("shelve %s: server in ERROR", a.Server)
		}
	case scheduler.Unshelve:
		s, err := e.nova.Server(ctx, a.Server)
		if err != nil {
			return false, nil
		}
		if s.Status == nova.StatusActive && s.TaskState == "" {
			return true, nil
		}
		if s.Status == nova.StatusError {
			return true, fmt.Errorf("unshelve %s: server in ERROR", a.Server)
		}
	}
	return false, nil
}

// wall converts a duration of the executor's clock to wall time.
func (e *Executor) wall(d time.Duration) time.Duration {
	if s, ok := e.clock.(*Scaled); ok {
		return s.Wall(d)
	}
	return d
}
