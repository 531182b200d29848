package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// The agent's side of fencing (fence.go): it answers grant requests,
// keeps what it granted while its partition lives, and adopts the grants
// of a partition whose leader it gave up on.

// grantAsk is a grant request (a demand query's Grant).
type grantAsk struct {
	Part   string           `json:"part"`
	Leader string           `json:"leader"`
	Event  scheduler.Event  `json:"event"`
	Action scheduler.Action `json:"action"`
}

// grantAnswer is the answer: granted, or why not.
type grantAnswer struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"`
}

// granted is one grant this agent gave.
type granted struct {
	id   string
	part string // read back from disk only
	ev   scheduler.Event
	a    scheduler.Action
	at   time.Time // this agent's clock
}

// ledger is what this agent granted, by partition, while the partition
// lives; closed: partitions that ended here (no grant for them any more).
// ended: the grants of partitions that ended here, until forget (they
// may be being adopted). With file set, grants and ended are kept there
// too (grants_file.go).
type ledger struct {
	mu         sync.Mutex
	grants     map[string][]granted
	ended      map[string][]granted
	closed     map[string]time.Time
	host, file string
}

// grant decides a request under the ledger's lock against the agent's
// partition p, and notes it when granted ("" is yes).
func (l *ledger) grant(host string, p *scheduler.Partition, id string, g grantAsk, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.closed[g.Part]; ok {
		return fmt.Sprintf("%s gave up on partition %s (leader %s)", host, g.Part, g.Leader)
	}
	if why := grantReason(host, p, g.Part, g.Leader, g.Action); why != "" {
		return why
	}
	if l.grants == nil {
		l.grants = map[string][]granted{}
	}
	if !slices.ContainsFunc(l.grants[g.Part], func(o granted) bool { return o.id == id }) {
		l.grants[g.Part] = append(l.grants[g.Part], granted{id: id, ev: g.Event, a: g.Action, at: now})
		if err := l.saveLocked(); err != nil {
			// A grant not on disk is not given: after a restart this
			// agent would not know to wait for its move.
			l.grants[g.Part] = l.grants[g.Part][:len(l.grants[g.Part])-1]
			return fmt.Sprintf("%s could not keep the grant: %v", host, err)
		}
	}
	return ""
}

// closeOut ends partition part here: no grant for it any more; its grants
// are returned (kept closed for a while, so a late request is refused),
// once, and kept (on disk too) until forget.
func (l *ledger) closeOut(part string, now time.Time) []granted {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed == nil {
		l.closed = map[string]time.Time{}
	}
	for p, at := range l.closed {
		if now.Sub(at) > time.Hour {
			delete(l.closed, p)
		}
	}
	l.closed[part] = now
	g := l.grants[part]
	delete(l.grants, part)
	if len(g) > 0 {
		if l.ended == nil {
			l.ended = map[string][]granted{}
		}
		l.ended[part] = append(l.ended[part], g...)
	}
	return g
}

// answerGrant answers a grant request (answerDemand); from is the asker
// the bus authenticated ("" on an unsigned bus): it must be the leader
// it names.
func (r *Runner) answerGrant(q demandQuery, from string) {
	g := *q.Grant
	why := ""
	if from != "" && from != g.Leader {
		why = fmt.Sprintf("asked by %s for leader %s", from, g.Leader)
	} else {
		why = r.fence.grant(r.agent.ID(), r.Partition(), q.ID, g, r.d.Clock.Now())
	}
	log := r.log.With().Str("grant", q.ID).Str("partition", g.Part).Str("leader", g.Leader).Str("server", g.Action.Server).Str("dest", g.Action.To).Logger()
	if why != "" {
		log.Warn().Str("reason", why).Msg("action not granted")
	} else {
		log.Debug().Msg("action granted")
	}
	out, err := json.Marshal(demandAnswer{V: 1, ID: q.ID, Host: r.agent.ID(), At: r.d.Clock.Now(), Grant: &grantAnswer{OK: why == "", Why: why}})
	if err == nil {
		err = r.d.Bus.Publish(context.Background(), q.Reply, out)
	}
	if err != nil {
		log.Warn().Err(err).Msg("grant answer not sent")
	}
}

// runnerFence grants the actions of one plan of this runner's partition
// (startExec): from the source host's agent over the bus, or at once
// for this agent's own host (it leads the partition).
type runnerFence struct {
	r            *Runner
	part, leader string
}

func (f runnerFence) Grant(ctx context.Context, ev scheduler.Event, a scheduler.Action) (Grant, error) {
	r := f.r
	asked := r.d.Clock.Now()
	if a.From == r.agent.ID() {
		if why := grantReason(a.From, r.Partition(), f.part, f.leader, a); why != "" {
			return Grant{}, fmt.Errorf("%w: %s", ErrNotGranted, why)
		}
		return Grant{ID: "local", Asked: asked}, nil
	}
	ans, err := r.ask(ctx, a.From, demandQuery{Grant: &grantAsk{Part: f.part, Leader: f.leader, Event: ev, Action: a}}, "a grant")
	switch {
	case err != nil:
		return Grant{}, err
	case ans.Grant == nil:
		// An agent of an older version answers with its demand: it knows
		// no grants. Unfenced, as before (a rolling upgrade goes on);
		// fencing holds once every agent runs this version.
		r.log.Debug().Str("host", a.From).Msg("source host's agent predates grants: action unfenced")
		return Grant{Asked: asked}, nil
	case !ans.Grant.OK:
		return Grant{}, fmt.Errorf("%w: %s", ErrNotGranted, ans.Grant.Why)
	}
	return Grant{ID: ans.ID, Asked: asked}, nil
}

// noteEnd is called with each record on the agent goroutine: a partition
// that ended here stops its grants; one whose leader this agent gave up
// on (timeout, leader declared dead, removed) with grants outstanding is
// adopted: the agent is held until Nova says how the granted moves
// ended (adopt).
func (r *Runner) noteEnd(ctx context.Context, rec scheduler.Record) {
	if rec.Kind != scheduler.RecDissolved || rec.Partition == "" {
		return
	}
	gs := r.fence.closeOut(rec.Partition, r.d.Clock.Now())
	if len(gs) == 0 {
		return
	}
	switch scheduler.EndClass(rec.Class) {
	case scheduler.EndTimeout, scheduler.EndMemberLost:
	default:
		// The leader ended it: its plan ended first, and it records its
		// actions.
		r.forgetGrants([]string{rec.Partition})
		return
	}
	r.log.Warn().Str("partition", rec.Partition).Int("granted", len(gs)).Str("reason", rec.Reason).
		Msg("gave up on the leader with moves granted: held until Nova says how they ended")
	r.adoptHeld(ctx, []string{rec.Partition}, gs)
}

// adoptHeld holds the agent (on its goroutine) while it adopts gs, the
// grants of parts, then records them (OnAdopt) and forgets them.
func (r *Runner) adoptHeld(ctx context.Context, parts []string, gs []granted) {
	r.agent.Hold(true)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		start := r.d.Clock.Now()
		res, requests := r.adopt(ctx, gs)
		if ctx.Err() != nil {
			return // stopped: the grants stay on disk, adopted at the next start
		}
		r.forgetGrants(parts)
		r.post(ctx, func(a *scheduler.Agent) { a.Hold(false) })
		for _, er := range res {
			r.log.Info().Strs("partitions", parts).Str("event", er.ev.ID).Int("done", er.res.Done).Int("failed", er.res.Failed).
				Int("not_sent", er.res.Skipped).Int("nova_requests", requests).Dur("held", r.d.Clock.Now().Sub(start)).
				Msg("adopted the lost leader's moves: recorded as they ended in Nova")
			if r.d.Hooks.OnAdopt != nil {
				r.d.Hooks.OnAdopt(r.agent.ID(), er.ev, er.res)
			}
		}
	}()
}

// forgetGrants drops the ended grants of parts (on disk too).
func (r *Runner) forgetGrants(parts []string) {
	if err := r.fence.forget(parts); err != nil {
		r.log.Warn().Err(err).Msg("grants kept on disk after they ended: adopted again after a restart")
	}
}

// eventResult is what adoption found for one event's granted moves.
type eventResult struct {
	ev  scheduler.Event
	res ExecResult
}

// adopt waits until no granted move can still be on its way (2 ×
// GrantValidity after the last grant) and none is still running in Nova
// (the host's servers re-read once per GrantValidity, at most
// MigrationTimeout after the last grant), then reads each granted server
// that left once to learn where it went (each still here: its migration
// list, once): each move's outcome as Nova tells it. Requests to Nova:
// one per GrantValidity while moves run, then one per granted server
// (counted in requests).
func (r *Runner) adopt(ctx context.Context, gs []granted) (out []eventResult, requests int) {
	host, clk, cfg := r.agent.ID(), r.d.Clock, r.cfg.Exec
	v := cfg.GrantValidity
	last := slices.MaxFunc(gs, func(a, b granted) int { return a.at.Compare(b.at) }).at
	if w := last.Add(2 * v).Sub(clk.Now()); w > 0 {
		select {
		case <-ctx.Done():
		case <-clk.After(w):
		}
	}
	var listed map[string]nova.Server
	for ctx.Err() == nil {
		requests++
		ss, err := r.d.Nova.Servers(ctx, host)
		if err == nil {
			listed = map[string]nova.Server{}
			for _, s := range ss {
				listed[s.ID] = s
			}
			if !slices.ContainsFunc(gs, func(g granted) bool { s, ok := listed[g.a.Server]; return ok && busy(s) }) {
				break
			}
		} else {
			r.log.Warn().Err(err).Msg("adopting the lost leader's moves: re-read of the host failed")
		}
		if clk.Now().Sub(last) > cfg.MigrationTimeout {
			listed = nil // unknown
			break
		}
		select {
		case <-ctx.Done():
		case <-clk.After(v):
		}
	}
	byEv := map[string]*eventResult{}
	var order []string
	for _, g := range gs {
		ar, n := r.outcome(ctx, g, listed)
		requests += n
		er := byEv[g.ev.ID]
		if er == nil {
			er = &eventResult{ev: g.ev}
			byEv[g.ev.ID] = er
			order = append(order, g.ev.ID)
		}
		er.res.Actions = append(er.res.Actions, ar)
		switch ar.Outcome {
		case ActionDone:
			er.res.Done++
		case ActionSkipped:
			er.res.Skipped++
		default:
			er.res.Failed++
		}
	}
	for _, id := range order {
		out = append(out, *byEv[id])
	}
	return out, requests
}

// busy: s is migrating (or otherwise in a task).
func busy(s nova.Server) bool { return s.Status == nova.StatusMigrating || s.TaskState != "" }

// outcome is how g's move ended, from the host's last listing (nil:
// unknown, the moves ran past MigrationTimeout or the reads failed) and
// at most one read of the server (requests: how many).
func (r *Runner) outcome(ctx context.Context, g granted, listed map[string]nova.Server) (res ActionResult, requests int) {
	a := g.a
	res = ActionResult{Action: a, Grant: g.id, Receipt: nova.Receipt{GlobalRequestID: RequestID(g.ev.ID)}}
	const who = "the lost leader's move, followed in Nova by its source's agent"
	if listed == nil {
		res.Outcome, res.Class, res.Reason = ActionFailed, ReasonTimeout, who+": outcome unknown (still running or Nova unreadable)"
		return res, requests
	}
	if s, here := listed[a.Server]; here {
		if a.Kind == scheduler.Shelve {
			if s.Status == nova.StatusShelved || s.Status == nova.StatusShelvedOffloaded {
				res.Outcome, res.Class, res.Reason = ActionDone, ReasonNone, who
				return res, requests
			}
			res.Outcome, res.Class, res.Reason = ActionSkipped, ReasonFenced, who+": not shelved (the request never reached Nova)"
			return res, requests
		}
		// Still here: a migration to a.To in its list newer than the grant
		// failed; none, the request never reached Nova.
		requests++
		ms, err := r.d.Nova.Migrations(ctx, a.Server)
		if err != nil {
			res.Outcome, res.Class, res.Reason = ActionFailed, ReasonTimeout, who+": still on its source, migration list unreadable: "+err.Error()
			return res, requests
		}
		for _, m := range ms {
			if m.Dest == a.To && m.Terminal() && !m.Succeeded() && !m.CreatedAt.Before(g.at.Add(-time.Minute)) {
				res.Outcome, res.Class, res.Reason = ActionFailed, ReasonFailed, fmt.Sprintf("%s: migration %s ended %s", who, m.ID, m.Status)
				return res, requests
			}
		}
		res.Outcome, res.Class, res.Reason = ActionSkipped, ReasonFenced, who+": still on its source, no migration in Nova (the request never reached it)"
		return res, requests
	}
	requests++
	s, err := r.d.Nova.Server(ctx, a.Server)
	switch {
	case errors.Is(err, nova.ErrNotFound):
		res.Outcome, res.Class, res.Reason = ActionFailed, ReasonFailed, who+": the server no longer exists"
	case err != nil:
		res.Outcome, res.Class, res.Reason = ActionFailed, ReasonTimeout, who+": left its source, re-read failed: "+err.Error()
	case a.Kind == scheduler.Shelve && s.Status == nova.StatusShelvedOffloaded, moves(a.Kind) && s.Host == a.To && s.Status != nova.StatusVerifyResize:
		res.Outcome, res.Class, res.Reason = ActionDone, ReasonNone, who
	case a.Kind == scheduler.ColdMigrate && s.Host == a.To:
		// The lost leader's cold migration waits in VERIFY_RESIZE: confirm it.
		requests++
		res.Outcome, res.Class, res.Reason = ActionDone, ReasonNone, who+": resize confirmed by its source's agent"
		if err := confirmResize(ctx, r.d.Nova, a.Server); err != nil {
			res.Outcome, res.Class, res.Reason = ActionFailed, ReasonFailed, who+": in VERIFY_RESIZE on its destination, confirm failed (openstack server resize confirm): "+err.Error()
		}
	default:
		res.Outcome, res.Class, res.Reason = ActionFailed, ReasonFailed, fmt.Sprintf("%s: server %s on %q, not on %s", who, s.Status, s.Host, a.To)
	}
	return res, requests
}
