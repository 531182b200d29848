package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// Fencing: one plan acts on a host at a time, across bus failures.
//
// A leader's executor asks each action's source host's agent for a grant
// right before it hands the action to Nova (Fence). The agent grants it
// only while it is a member of the leader's partition under that leader,
// and notes the grant. Once it has given up on the leader (no word for
// the partition timeout, or the leader declared dead), it grants nothing
// more to it, whatever the bus does later: a plan its leader lost acts on
// no new server of the host. A leader cut off from the bus gets no grant
// (no answer within the query's 3.5 s) and sends nothing. A grant is good
// for ExecConfig.GrantValidity from its asking: the executor sends the
// action by then or skips it, so an agent that gave up on its leader
// knows that, 2 × GrantValidity after its last grant, no request of that
// leader is still on its way to Nova (the request is bounded by twice
// the validity).
//
// The agent that gave up on a leader with grants outstanding adopts them
// (adopt.go): it raises no event and joins no partition until Nova says
// each granted move ended (its host's servers re-read once per
// GrantValidity, then each granted server once), and records each with
// its true outcome under the grant's id. Requests to Nova: none while
// plans end as they should; only when a plan was lost.

// Fence grants the actions of one plan (ExecuteFenced).
type Fence interface {
	// Grant asks a's source host's agent for the right to hand a to
	// Nova now. An error (ErrNotGranted, or the agent did not answer)
	// means no: the action is skipped.
	Grant(ctx context.Context, ev scheduler.Event, a scheduler.Action) (Grant, error)
}

// Grant is a source host's agent's leave to send one action.
type Grant struct {
	// ID names the grant; the action's records carry it.
	ID string
	// Asked is when the executor asked for it (its clock): the action is
	// sent within GrantValidity of it, and its request ends within twice
	// that.
	Asked time.Time
}

// ErrNotGranted: the source host's agent refused the grant (it is not in
// the asking leader's partition any more).
var ErrNotGranted = errors.New("not granted")

// granted asks f's fence (if any) for a's grant and says why a is not
// sent when it is refused or expired. callCtx bounds the Nova request to
// twice GrantValidity from the asking (release frees it).
func (e *Executor) granted(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight, r *ActionResult) (callCtx context.Context, release func(), sk skip) {
	if f.fence == nil {
		return ctx, func() {}, skip{}
	}
	v := e.cfg.GrantValidity
	if v <= 0 {
		v = DefaultExecConfig().GrantValidity
	}
	asked := e.clock.Now()
	g, err := f.fence.Grant(ctx, ev, a)
	if err != nil {
		sk := skipf(ReasonFenced, "fenced: %s's agent did not grant the action: %v", a.From, err)
		if errors.Is(err, ErrNotGranted) {
			f.refuse(a.From, sk)
		}
		return ctx, func() {}, sk
	}
	if g.Asked.IsZero() || g.Asked.After(asked) {
		g.Asked = asked
	}
	r.Grant = g.ID
	if late := e.clock.Now().Sub(g.Asked); late > v {
		return ctx, func() {}, skipf(ReasonFenced, "fenced: grant %s came %s after it was asked, past its validity of %s", g.ID, late.Round(time.Millisecond), v)
	}
	callCtx, cancel := context.WithTimeout(ctx, e.wall(2*v-e.clock.Now().Sub(g.Asked)))
	return callCtx, cancel, skip{}
}

// refuse notes that from's agent refused this plan a grant: it no
// longer follows the plan's leader, and will not again (fence.go), so
// the plan's later actions from it are skipped before their re-check
// costs Nova anything.
func (f *flight) refuse(from string, sk skip) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused == nil {
		f.refused = map[string]skip{}
	}
	f.refused[from] = sk
}

// refusedBy is the refusal of from's agent ("" when none).
func (f *flight) refusedBy(from string) skip {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused[from]
}

// grantReason is why a grant request is refused ("" when granted): the
// agent of host grants actions from its host only to the leader of the
// partition it is in, for that partition.
func grantReason(host string, p *scheduler.Partition, partID, leader string, a scheduler.Action) string {
	switch {
	case a.From != host:
		return fmt.Sprintf("action from %s asked of %s", a.From, host)
	case p == nil:
		return fmt.Sprintf("%s is in no partition (it gave up on leader %s, or the partition ended)", host, leader)
	case p.ID != partID:
		return fmt.Sprintf("%s is in partition %s, not %s", host, p.ID, partID)
	case p.Leader != leader:
		return fmt.Sprintf("%s follows leader %s, not %s", host, p.Leader, leader)
	}
	return ""
}
