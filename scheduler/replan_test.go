package scheduler

import (
	"slices"
	"strings"
	"testing"
)

// executing returns h2 leading h1's OVERLOAD partition {h1, h2}, its plan
// (one move of h1's server to h2) being executed, and h1 the member.
func executing(t *testing.T) (h1, h2 *Agent, ev Event, req ExecRequest) {
	t.Helper()
	h1, h2 = newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	g := only(t, overload(t, h1), MsgGrow)
	ev = g.Msg.Part.Events[0]
	h2.Step(g.Msg)
	h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	sr := h2.Ready().Solve
	if len(sr) != 1 {
		t.Fatalf("solve requests %+v", sr)
	}
	h2.SolveDone(sr[0].PartID, sr[0].Version, Solution{OK: true, Solved: []string{ev.ID}}, movePlan("h1-s", "h1", "h2"), nil)
	rd := h2.Ready()
	if len(rd.Execute) != 1 {
		t.Fatalf("execute requests %+v", rd.Execute)
	}
	h1.Step(only(t, rd, MsgUpdate).Msg) // Finishing
	h1.Ready()
	return h1, h2, ev, rd.Execute[0]
}

func movePlan(server, from, to string) Plan {
	return Plan{Steps: [][]Action{{{Kind: LiveMigrate, Server: server, From: from, To: to, VCPUs: 2, RAMMB: 1024, CPU: 3, RAM: 512}}}}
}

// replanCollect drives a re-plan's collection: the leader asks its member
// for a fresh snapshot (a Growing update at a new version), the member
// answers, and the leader asks for a solve, which is returned.
func replanCollect(t *testing.T, h1, h2 *Agent) SolveRequest {
	t.Helper()
	rd := h2.Ready()
	if len(records(rd, RecReplanning)) != 1 || len(records(rd, RecEventEnded)) != 0 {
		t.Fatalf("no re-plan: records %+v", rd.Records)
	}
	up := only(t, rd, MsgUpdate)
	if up.To != "h1" || up.Msg.Part.State != Growing {
		t.Fatalf("re-plan update %+v", up)
	}
	h1.Step(up.Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	sr := h2.Ready().Solve
	if len(sr) != 1 {
		t.Fatalf("solve requests after the re-plan's snapshots: %+v", sr)
	}
	return sr[0]
}

func eventEnd(t *testing.T, rd Ready) Record {
	t.Helper()
	e := records(rd, RecEventEnded)
	if len(e) != 1 {
		t.Fatalf("event-ended records %+v", rd.Records)
	}
	return e[0]
}

// DESIGN §5.5: a plan whose re-checks skipped actions while its event
// still holds is solved again in its partition (issue 9: at 10,000 hosts
// and a queued Nova API, 187 of 192 aborted events were such plans); the
// event can still end Solved.
func TestReplanAfterSkippedActions(t *testing.T) {
	h1, h2, ev, req := executing(t)
	h2.PlanSkipped(req.PartID, req.Version, nil, EndSkipped, "0 done, 1 skipped, 0 failed")
	if p := h2.Partition(); p == nil || p.Version != req.Version+1 || p.State != Growing {
		t.Fatalf("partition after the skipped plan %+v", p)
	}
	sr := replanCollect(t, h1, h2)
	if len(sr.Problem.Hosts) != 2 || sr.Problem.Events[0].ID != ev.ID {
		t.Fatalf("re-plan's problem %+v", sr.Problem)
	}
	h2.SolveDone(sr.PartID, sr.Version, Solution{OK: true, Solved: []string{ev.ID}}, movePlan("h1-s", "h1", "h2"), nil)
	rd := h2.Ready()
	if len(rd.Execute) != 1 || h2.Partition().State != Finishing {
		t.Fatalf("re-plan not executed: %+v", rd.Execute)
	}
	h1.Step(only(t, rd, MsgUpdate).Msg)
	h1.Ready()
	h2.PlanDone(rd.Execute[0].PartID, rd.Execute[0].Version, Solved, EndExecuted, "1 done, 0 skipped, 0 failed")
	rd = h2.Ready()
	h1.Step(only(t, rd, MsgDissolve).Msg)
	e := eventEnd(t, h1.Ready())
	if e.Outcome != Solved || e.Class != EndExecuted || e.Event.ID != ev.ID || !strings.Contains(e.Reason, "1 re-plan") {
		t.Fatalf("event ended %+v, want solved after 1 re-plan", e)
	}
	// The member's sample is stale: the plans moved servers.
	if s := h1.snapshot(); !s.Disabled {
		t.Fatal("member offers its pre-plan sample after the partition ended")
	}
}

// The re-plans are bounded: after maxReplans, skipped actions end the
// event Aborted, as they do when the leader is stopping.
func TestReplanBounded(t *testing.T) {
	t.Run("bound", func(t *testing.T) {
		h1, h2, _, req := executing(t)
		for i := 0; i < maxReplans; i++ {
			h2.PlanSkipped(req.PartID, req.Version, nil, EndSkipped, "0 done, 1 skipped, 0 failed")
			sr := replanCollect(t, h1, h2)
			h2.SolveDone(sr.PartID, sr.Version, Solution{OK: true, Solved: []string{req.Event.ID}}, movePlan("h1-s", "h1", "h2"), nil)
			rd := h2.Ready()
			req = rd.Execute[0]
			h1.Step(only(t, rd, MsgUpdate).Msg)
			h1.Ready()
		}
		h2.PlanSkipped(req.PartID, req.Version, nil, EndSkipped, "0 done, 1 skipped, 0 failed")
		rd := h2.Ready()
		h1.Step(only(t, rd, MsgDissolve).Msg)
		if e := eventEnd(t, h1.Ready()); e.Outcome != Aborted || e.Class != EndSkipped || !strings.Contains(e.Reason, "2 re-plan") {
			t.Fatalf("event ended %+v, want aborted after 2 re-plans", e)
		}
	})
	t.Run("stopping", func(t *testing.T) {
		h1, h2, _, req := executing(t)
		if busy := h2.Retire(t0); !busy {
			t.Fatal("a leader executing a plan is busy")
		}
		h2.PlanSkipped(req.PartID, req.Version, nil, EndSkipped, "0 done, 1 skipped, 0 failed")
		rd := h2.Ready()
		if len(records(rd, RecReplanning)) != 0 {
			t.Fatal("a stopping leader re-planned")
		}
		h1.Step(only(t, rd, MsgDissolve).Msg)
		if e := eventEnd(t, h1.Ready()); e.Outcome != Aborted {
			t.Fatalf("event ended %+v, want aborted", e)
		}
	})
}

// A re-plan that finds nothing left to do ends the event Solved only if
// the partition's plans moved something: an overload that vanished by
// itself was not solved.
func TestReplanNothingToDo(t *testing.T) {
	for _, tc := range []struct {
		name string
		done []Action
		want Outcome
	}{
		{"nothing moved", nil, Aborted},
		{"moves done", movePlan("h1-s", "h1", "h2").Steps[0], Solved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h1, h2, ev, req := executing(t)
			h2.PlanSkipped(req.PartID, req.Version, tc.done, EndSkipped, "skipped")
			sr := replanCollect(t, h1, h2)
			h2.SolveDone(sr.PartID, sr.Version, Solution{OK: true, Reason: "nothing to do", Solved: []string{ev.ID}}, Plan{}, nil)
			h1.Step(only(t, h2.Ready(), MsgDissolve).Msg)
			if e := eventEnd(t, h1.Ready()); e.Outcome != tc.want {
				t.Fatalf("event ended %+v, want %s", e, tc.want)
			}
		})
	}
}

// The re-plan's snapshots show the moves Nova did: a member's sample lists
// its servers as of its last read from Nova.
func TestReplanSnapshotsShowMovesDone(t *testing.T) {
	h1, h2, _, req := executing(t)
	h2.PlanSkipped(req.PartID, req.Version, movePlan("h1-s", "h1", "h2").Steps[0], EndSkipped, "1 done, 1 skipped, 0 failed")
	sr := replanCollect(t, h1, h2)
	ids := func(name string) []string {
		var out []string
		for _, h := range sr.Problem.Hosts {
			if h.Name == name {
				for _, s := range h.Servers {
					out = append(out, s.ID)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	if got := ids("h1"); len(got) != 0 {
		t.Errorf("h1 lists %v, want the moved server gone", got)
	}
	if got := ids("h2"); !slices.Equal(got, []string{"h1-s", "h2-s"}) {
		t.Errorf("h2 lists %v, want the moved server there", got)
	}
	for _, h := range sr.Problem.Hosts {
		if h.Name != "h2" {
			continue
		}
		if h.UsedVCPUs != 2 {
			t.Errorf("h2 uses %v VCPUs, want the moved server's 2 counted", h.UsedVCPUs)
		}
		// DESIGN §8: at most one move per server per plan, and an
		// event's plans share its request id.
		for _, s := range h.Servers {
			if s.Fixed != (s.ID == "h1-s") {
				t.Errorf("server %s fixed %v: only the moved server stays where the plan put it", s.ID, s.Fixed)
			}
		}
	}
	if s := h2.lead.snaps["h1"]; len(s.Servers) != 1 {
		t.Fatalf("the snapshot h1 sent was changed in place: %+v", s)
	}
}

// A re-plan without a solution in the partition grows it, as a Growing
// partition does (DESIGN §5.2.3): the node that joins leads it, counts
// the re-plans and applies the moves done to its members' snapshots.
func TestReplanWithoutSolutionGrows(t *testing.T) {
	h1, h2, ev, req := executing(t)
	done := movePlan("h1-s", "h1", "h2").Steps[0]
	h2.PlanSkipped(req.PartID, req.Version, done, EndSkipped, "1 done, 1 skipped, 0 failed")
	sr := replanCollect(t, h1, h2)
	h2.SolveDone(sr.PartID, sr.Version, Solution{Reason: "no viable placement in the partition"}, Plan{}, nil)
	g := only(t, h2.Ready(), MsgGrow)
	if g.To != "h3" || g.Msg.Part.Replans != 1 || len(g.Msg.Part.Moved) != 1 || g.Msg.Part.State != Growing {
		t.Fatalf("request after the re-plan %+v", g)
	}
	h3 := newAgent(t, "h3")
	h3.Observe(t0, hostWith("h3", 1))
	h3.Step(g.Msg)
	rd := h3.Ready()
	for _, up := range sent(rd, MsgUpdate) {
		m := map[string]*Agent{"h1": h1, "h2": h2}[up.To]
		m.Step(up.Msg)
		h3.Step(only(t, m.Ready(), MsgSnapshot).Msg)
	}
	rd = h3.Ready()
	if len(rd.Solve) != 1 {
		t.Fatalf("the new leader's solve requests %+v", rd.Solve)
	}
	for _, h := range rd.Solve[0].Problem.Hosts {
		if h.Name == "h1" && len(h.Servers) != 0 || h.Name == "h2" && len(h.Servers) != 2 {
			t.Fatalf("the new leader's snapshot of %s lists %+v, want the move done applied", h.Name, h.Servers)
		}
	}
	// Nothing left to do: solved, since a move was done.
	h3.SolveDone(rd.Solve[0].PartID, rd.Solve[0].Version, Solution{OK: true, Reason: "nothing to do", Solved: []string{ev.ID}}, Plan{}, nil)
	for _, d := range sent(h3.Ready(), MsgDissolve) {
		if d.To == "h1" {
			h1.Step(d.Msg)
		}
	}
	if e := eventEnd(t, h1.Ready()); e.Outcome != Solved || !strings.Contains(e.Reason, "1 re-plan") {
		t.Fatalf("event ended %+v, want solved after 1 re-plan", e)
	}
	// Ended Growing, but a plan ran: the member's sample is stale.
	if s := h1.snapshot(); !s.Disabled {
		t.Fatal("member offers its pre-plan sample after the partition ended")
	}
}
