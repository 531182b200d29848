package scheduler

// Re-planning (DESIGN §5.5): a plan whose re-checks skipped actions
// because the cloud changed under it is solved again, on fresh
// snapshots, before its event is given up.

import (
	"fmt"
	"slices"
)

// maxReplans bounds the re-plans of one partition (PlanSkipped).
const maxReplans = 2

// PlanSkipped reports a plan whose re-checks skipped actions because the
// cloud changed under it (a destination no longer fits, a server moved or
// got busy), none failed, while the event's host still needs help by its
// own measurement; done are the plan's actions Nova did. The runtime
// reports with PlanDone instead when the event's reason no longer holds
// (it is not solved then) or when an operator control or a stop skipped
// them. The leader does not give the event up at once: it keeps its
// members, asks them for fresh snapshots and solves again in the same
// partition (a new version, Growing: members answer it), with the actions
// done (Partition.Moved) applied to the snapshots. A re-plan's plan runs
// as the first did (the executor re-checks every action). With no
// solution the partition grows, as a Growing partition does (DESIGN
// §5.2.3): the node that joins leads it, and applies Moved too. After
// maxReplans re-plans, or when the leader is stopping, skipped actions
// end the event Aborted as before. A re-plan that finds nothing left to
// do ends Solved only if some action of the partition's plans was done:
// an overload that vanished by itself was not solved (see SolveDone).
//
// c sorts reason, should the event end (EndClass).
func (a *Agent) PlanSkipped(partID string, version uint64, done []Action, c EndClass, reason string) {
	if !a.leader() || a.part.ID != partID || a.part.Version != version || a.lead.phase != phExecuting {
		return
	}
	p := a.part
	p.Moved = append(p.Moved, done...)
	if a.retired || p.Replans >= maxReplans {
		if p.Replans > 0 {
			reason = fmt.Sprintf("%s (after %d re-plan(s))", reason, p.Replans)
		}
		a.dissolve(Aborted, c, reason)
		return
	}
	p.Replans++
	p.State = Growing
	p.Version++
	a.record(Record{Kind: RecReplanning, Event: p.Events[0], Reason: reason})
	a.broadcast(a.update()) // members answer with their snapshot
	a.collect()
}

// applyDone returns hosts (snapshots, copied where changed) with the
// actions Nova did applied: a server moved off its source, and onto its
// destination at the demand and flavor the plan gave it, unless the
// snapshot lists it there already. A member's sample lists its servers as
// of its last read from Nova, which it does not repeat while in the
// partition (scheduler/node's monitor); its demand is measured every
// sample. Counting a server on both ends or at a demand a moment old only
// costs a plan: the executor re-checks every action against Nova. A
// server moved is Fixed for the rest of the partition: DESIGN §8 migrates
// a server at most once per plan, and the plans of one event share its
// request id (a later plan moving it again would be ping-pong).
func applyDone(hosts []Host, done []Action) []Host {
	idx := make(map[string]int, len(hosts))
	for i := range hosts {
		idx[hosts[i].Name] = i
	}
	copied := map[int]bool{}
	host := func(name string) *Host {
		i, ok := idx[name]
		if !ok {
			return nil
		}
		if !copied[i] {
			hosts[i].Servers = slices.Clone(hosts[i].Servers)
			copied[i] = true
		}
		return &hosts[i]
	}
	for _, d := range done {
		if h := host(d.From); h != nil {
			if k := slices.IndexFunc(h.Servers, func(s Server) bool { return s.ID == d.Server }); k >= 0 {
				h.Servers = slices.Delete(h.Servers, k, k+1)
				h.UsedVCPUs = max(0, h.UsedVCPUs-float64(d.VCPUs))
				h.UsedRAMMB = max(0, h.UsedRAMMB-float64(d.RAMMB))
			}
		}
		if d.Kind != LiveMigrate {
			continue
		}
		h := host(d.To)
		if h == nil {
			continue
		}
		k := slices.IndexFunc(h.Servers, func(s Server) bool { return s.ID == d.Server })
		if k < 0 {
			h.Servers = append(h.Servers, d.asServer())
			h.UsedVCPUs += float64(d.VCPUs)
			h.UsedRAMMB += float64(d.RAMMB)
			k = len(h.Servers) - 1
		}
		h.Servers[k].Fixed, h.Servers[k].FixedReason = true, "moved by this partition's plan"
	}
	return hosts
}
