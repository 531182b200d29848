package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkRole reports a broken state invariant: an agent holds a leading
// exactly while its partition names it leader, and a leader's phase is
// one of a leader's.
func checkRole(a *Agent) error {
	leads := a.part != nil && a.part.Leader == a.cfg.ID
	switch {
	case leads && a.lead == nil:
		return fmt.Errorf("%s leads %s (v%d) without a leader's state", a.cfg.ID, a.part.ID, a.part.Version)
	case !leads && a.lead != nil && a.part == nil:
		return fmt.Errorf("%s holds a leader's state (phase %d) in no partition", a.cfg.ID, a.lead.phase)
	case !leads && a.lead != nil:
		return fmt.Errorf("%s holds a leader's state (phase %d) in %s, led by %s", a.cfg.ID, a.lead.phase, a.part.ID, a.part.Leader)
	case leads && a.lead.phase == phNone:
		return fmt.Errorf("%s leads %s (v%d) in no phase", a.cfg.ID, a.part.ID, a.part.Version)
	}
	return nil
}

// The leader's state exists exactly while the agent leads, through every
// path of the protocol: a seeded cloud of agents with overloads, lost and
// reordered messages, merges committed and refused, solutions found or
// not, plans done or skipped, and members that crash. Every leader-only
// read outside the leader state would panic here (Agent.lead is nil);
// checkRole catches a leadership entered or left without setPart.
func TestLeaderStateOnlyWhileLeading(t *testing.T) {
	total := map[RecordKind]int{}
	handovers := 0
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			kinds, h := roleWalk(t, seed)
			for k, v := range kinds {
				total[k] += v
			}
			handovers += h
		})
	}
	// The walks must take the paths that enter and leave leadership other
	// than raising and ending, else they prove little.
	for _, k := range []RecordKind{RecJoined, RecMergeCommitted, RecMergeRefused, RecReplanning, RecMemberRemoved, RecBlocked} {
		if total[k] == 0 {
			t.Errorf("no %s in any walk: %v", k, total)
		}
	}
	if handovers == 0 {
		t.Error("no leader handed its partition over to a node that joined")
	}
}

// roleWalk runs one seeded walk, checking every agent after every input;
// it returns the records seen and how often a leader became a member of
// the same partition.
func roleWalk(t *testing.T, seed uint64) (kinds map[RecordKind]int, handovers int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("h%02d", i)
	}
	agents := map[string]*Agent{}
	for _, id := range ids {
		cfg := DefaultConfig(id)
		cfg.ReliefHeadroom, cfg.Preempt, cfg.Underload = 0.4, seed%2 == 0, true
		a, err := NewAgent(cfg, ids)
		if err != nil {
			t.Fatal(err)
		}
		agents[id] = a
	}
	now := t0
	type pending struct {
		to string
		m  Message
	}
	var inbox []pending
	roles := map[role]int{}
	phases := map[phase]int{}
	ledPart := map[string]string{} // agent -> the partition it led at the last check
	check := func(what string) {
		t.Helper()
		for _, id := range ids {
			a := agents[id]
			if err := checkRole(a); err != nil {
				t.Fatalf("seed %d, %s at %s: %v", seed, what, now.Sub(t0), err)
			}
			if a.role() == member && ledPart[id] == a.part.ID {
				handovers++
			}
			ledPart[id] = ""
			if a.role() == leader {
				ledPart[id] = a.part.ID
			}
			roles[a.role()]++
			if a.lead != nil {
				phases[a.lead.phase]++
			}
		}
	}
	kinds = map[RecordKind]int{}
	drain := func(a *Agent) {
		rd := a.Ready()
		for _, r := range rd.Records {
			kinds[r.Kind]++
		}
		for _, e := range rd.Messages {
			if rng.IntN(20) > 0 { // one in twenty lost
				inbox = append(inbox, pending{e.To, e.Msg})
			}
		}
		for _, req := range rd.Solve {
			sol, plan, err := SolveAndPlan(req.Problem, req.Limits, DefaultSolveOptions())
			if rng.IntN(6) == 0 {
				sol, plan, err = Solution{Reason: "none"}, Plan{}, nil
			}
			a.SolveDone(req.PartID, req.Version, sol, plan, err)
			check("SolveDone")
		}
		for _, req := range rd.Execute {
			if rng.IntN(4) == 0 {
				a.PlanSkipped(req.PartID, req.Version, nil, EndSkipped, "skipped")
			} else {
				a.PlanDone(req.PartID, req.Version, Solved, EndExecuted, "done")
			}
			check("PlanDone")
		}
		for _, req := range rd.Arbiter {
			res := ArbiterResult{}
			if req.Op == ArbMerge {
				switch rng.IntN(3) {
				case 0:
					res.Reason = "refused"
				case 1:
					res.Unknown = true
				default:
					res.Committed, res.Version = true, req.Part.Version+1
					res.Nodes = append(slices.Clone(req.Part.Nodes), req.Absorb.Nodes...)
				}
			} else if req.Op == ArbRead {
				res.Committed, res.Version = rng.IntN(2) == 0, req.Part.Version+1
				res.Nodes = append(slices.Clone(req.Part.Nodes), req.Absorb.Nodes...)
			}
			a.ArbiterDone(req, res)
			check("ArbiterDone")
		}
	}
	load := map[string]float64{}
	for step := range 600 {
		now = now.Add(100 * time.Millisecond)
		if step%10 == 0 {
			for _, id := range ids {
				if rng.IntN(8) == 0 {
					load[id] = []float64{0.2, 2, 6}[rng.IntN(3)]
				}
				agents[id].Observe(now, hostWith(id, load[id]))
				check("Observe")
				drain(agents[id])
			}
		}
		if step == 300 {
			// A member crashes: everyone is told.
			dead := ids[rng.IntN(n)]
			for _, id := range ids {
				if id != dead {
					agents[id].MemberDown(dead)
					check("MemberDown")
					drain(agents[id])
				}
			}
		}
		rng.Shuffle(len(inbox), func(i, j int) { inbox[i], inbox[j] = inbox[j], inbox[i] })
		batch := inbox
		inbox = nil
		for _, p := range batch {
			a := agents[p.to]
			a.Step(p.m)
			check("Step " + p.m.Type.String())
			drain(a)
		}
		for _, id := range ids {
			agents[id].Tick(now)
			check("Tick")
			drain(agents[id])
		}
	}
	// The walk must reach every role and every leader phase, else it
	// proves little.
	for _, r := range []role{idle, member, leader} {
		if roles[r] == 0 {
			t.Errorf("seed %d: no agent was ever %s", seed, r)
		}
	}
	for _, ph := range []phase{phWaiting, phCollecting, phSolving, phExecuting} {
		if phases[ph] == 0 {
			t.Errorf("seed %d: no leader was ever in phase %d", seed, ph)
		}
	}
	return kinds, handovers
}
