package agentd

import (
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Only advised plans are kept, the newest MaxAdvised; a plan is decided
// once: a reject drops it, a second decision finds nothing.
func TestApprovalsKeepAdvisedPlans(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	p := newApprovals("c1", journal.New("c1", now), zerolog.Nop(), now)
	req := func(i int) scheduler.ExecRequest {
		return scheduler.ExecRequest{Event: scheduler.Event{ID: fmt.Sprint("e", i), Kind: scheduler.Overload, Host: "c1"}}
	}
	advised := node.ExecResult{Actions: []node.ActionResult{{Outcome: node.ActionSkipped, Class: node.ReasonAdvise}}}
	done := node.ExecResult{Actions: []node.ActionResult{{Outcome: node.ActionDone, Class: node.ReasonNone}}}
	p.keep(req(0), done)
	for i := 1; i <= MaxAdvised+1; i++ {
		p.keep(req(i), advised)
	}
	var answers []control.Ack
	answer := func(a control.Ack) { answers = append(answers, a) }
	for _, id := range []string{"e0", "e1"} { // executed; evicted (the oldest)
		p.take(control.Command{Op: control.OpReject, Plan: id}, "alice", answer)
	}
	p.take(control.Command{Op: control.OpReject, Plan: "e2"}, "alice", answer)
	p.take(control.Command{Op: control.OpReject, Plan: "e2"}, "alice", answer)
	if len(answers) != 4 || answers[0].Reason != control.NoPlanHere || answers[1].Reason != control.NoPlanHere ||
		!answers[2].Accepted || answers[2].Plan != "e2" || answers[3].Reason != control.NoPlanHere {
		t.Fatalf("answers %+v", answers)
	}
	es := p.j.Snapshot()
	if len(es) != 1 || es[0].Approval == nil || es[0].Approval.State != journal.Rejected || es[0].Approval.Operator != "alice" {
		t.Errorf("journal: %+v", es)
	}
}
