package agentd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
)

// MaxAdvised is how many advised plans an agent keeps for `dvms plans
// approve` (the newest; an agent in advise mode plans its event again
// after each backoff, so an old plan is soon replaced by a fresher one).
const MaxAdvised = 32

// approvals keeps the plans this agent advised (executed in advise mode:
// re-checked, not sent) and carries out the operators' decisions on them
// (control.OpApprove, OpReject): an approved plan is re-checked first (a
// dry run: nothing sent), refused with the reasons when any move no
// longer holds, else executed by the runner's executor. One approval at a
// time; Run owns the goroutine.
type approvals struct {
	host   string
	run    func(ctx context.Context, ev scheduler.Event, plan scheduler.Plan, dry bool) node.ExecResult
	onExec func(ev scheduler.Event, res node.ExecResult) // journal and metrics
	j      *journal.Journal
	log    zerolog.Logger
	now    func() time.Time

	mu    sync.Mutex
	plans map[string]scheduler.ExecRequest // by event id
	order []string                         // event ids, oldest first
	jobs  chan approval
}

type approval struct {
	req    scheduler.ExecRequest
	cmd    control.Command
	by     string
	answer func(control.Ack)
}

func newApprovals(host string, j *journal.Journal, log zerolog.Logger, now func() time.Time) *approvals {
	return &approvals{host: host, j: j, log: log, now: now, plans: map[string]scheduler.ExecRequest{}, jobs: make(chan approval, 4)}
}

// keep notes req's plan when it was advised (any action held back by
// advise mode).
func (p *approvals) keep(req scheduler.ExecRequest, res node.ExecResult) {
	if !slices.ContainsFunc(res.Actions, func(a node.ActionResult) bool { return a.Class == node.ReasonAdvise }) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.plans[req.Event.ID]; !ok {
		p.order = append(p.order, req.Event.ID)
	}
	p.plans[req.Event.ID] = req
	for len(p.order) > MaxAdvised {
		delete(p.plans, p.order[0])
		p.order = p.order[1:]
	}
}

// claim takes the plan of event id out of the store (a plan is decided
// once).
func (p *approvals) claim(id string) (scheduler.ExecRequest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req, ok := p.plans[id]
	if ok {
		delete(p.plans, id)
		p.order = slices.DeleteFunc(p.order, func(s string) bool { return s == id })
	}
	return req, ok
}

// give puts a claimed plan back (the approval could not be queued).
func (p *approvals) give(req scheduler.ExecRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[req.Event.ID] = req
	p.order = append(p.order, req.Event.ID)
}

// take is control.Service.Plans: an operator's verified decision.
func (p *approvals) take(cmd control.Command, by string, answer func(control.Ack)) {
	req, ok := p.claim(cmd.Plan)
	if !ok {
		answer(control.Ack{Reason: control.NoPlanHere})
		return
	}
	if cmd.Op == control.OpReject {
		p.j.Decide(req.Event, journal.Approval{State: journal.Rejected, Operator: by, Command: cmd.ID, Reason: "plan dropped, nothing sent to Nova"})
		p.log.Info().Str("plan", cmd.Plan).Str("operator", by).Msg("advised plan rejected by the operator: dropped")
		answer(control.Ack{Accepted: true, Plan: cmd.Plan, Reason: "rejected: plan dropped"})
		return
	}
	select {
	case p.jobs <- approval{req: req, cmd: cmd, by: by, answer: answer}:
	default:
		p.give(req)
		answer(control.Ack{Plan: cmd.Plan, Reason: "busy: other approvals are being carried out, send it again"})
	}
}

// Run carries out the approvals until ctx ends.
func (p *approvals) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ap := <-p.jobs:
			p.approve(ctx, ap)
		}
	}
}

func (p *approvals) approve(ctx context.Context, ap approval) {
	ev, plan := ap.req.Event, ap.req.Plan
	log := p.log.With().Str("plan", ev.ID).Str("operator", ap.by).Str("command", ap.cmd.ID).Logger()
	dry := p.run(ctx, ev, plan, true)
	if why := refusal(dry); why != "" {
		p.j.Decide(ev, journal.Approval{State: journal.Refused, Operator: ap.by, Command: ap.cmd.ID, Reason: why})
		// The moves that would not run, each with its reason (dvms
		// explain SERVER); journal only: nothing was sent, no metric.
		dry.Actions = slices.DeleteFunc(dry.Actions, func(a node.ActionResult) bool { return a.Class == node.ReasonAdvise })
		p.j.Exec(ev, dry)
		log.Info().Str("reason", why).Msg("approved plan refused: the cloud changed since it was advised, nothing sent")
		ap.answer(control.Ack{Plan: ev.ID, Reason: "refused: " + why})
		return
	}
	n := len(dry.Actions)
	p.j.Decide(ev, journal.Approval{State: journal.Approved, Operator: ap.by, Command: ap.cmd.ID,
		Reason: fmt.Sprintf("re-checked: %d actions hold, executing", n)})
	log.Info().Int("actions", n).Msg("approved plan re-checked: executing")
	ap.answer(control.Ack{Accepted: true, Plan: ev.ID, Reason: fmt.Sprintf("approved: re-checked, executing %d actions (dvms explain, dvms events --follow)", n)})
	res := p.run(ctx, ev, plan, false)
	if p.onExec != nil {
		p.onExec(ev, res)
	}
	log.Info().Int("done", res.Done).Int("skipped", res.Skipped).Int("failed", res.Failed).Msg("approved plan executed")
}

// refusal says why a plan whose dry run gave res is refused ("" when
// every action's re-check held): each action that would not run, and why.
func refusal(res node.ExecResult) string {
	var why []string
	for _, a := range res.Actions {
		if a.Class == node.ReasonAdvise {
			continue
		}
		why = append(why, fmt.Sprintf("%s %s %s -> %s: %s [%s]", a.Action.Kind, a.Action.Server, a.Action.From, a.Action.To, a.Reason, a.Class))
	}
	if len(res.Actions) == 0 {
		return "the plan has no action"
	}
	return strings.Join(why, "; ")
}
