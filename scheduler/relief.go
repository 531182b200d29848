package scheduler

// Relief headroom (Config.ReliefHeadroom, Config.ReliefPartition): the
// whole rule, agent side and solver side, in this file.
//
// A partition relieving an overload does not take the first destination
// that fits: that host is often the next to overload. While it may grow
// (mayGrowForRelief: one event, Growing, no tour nor re-plan yet, fewer
// than ReliefPartition hosts and fewer than the ring, every member in one
// availability zone, and its first fit, if any, within reliefFirstFit
// hosts), its leader asks the solver for destinations that keep
// ReliefHeadroom of their demand limits free (reliefHeadroom).
//
// Which destinations count: a host that is a possible destination
// (not disabled, draining or emptied) and whose demand, with the server
// it receives, stays within its limits scaled by 1-ReliefHeadroom
// (solveForRelief's first search; search.bestDest applies the same keep
// to every server leaving an overloaded host). When no host of the
// partition has that room even before receiving anything, or the
// partition has no overloaded host, that search is skipped.
//
// When no destination with room exists but one that only fits does, the
// solver answers with that solution and ReliefUnmet. The leader then
// passes it over and grows instead (growForRelief: relief.deferred),
// remembering the size at which it first fit (Partition.FitAt): past
// reliefFirstFit hosts the cloud around is tight and it takes what fits.
// Growth for relief ends (reliefDone: relief.off, fresh snapshots, any
// destination that fits) when the request comes back without a node
// (reliefRequestBack, the tour not counted) or is lost
// (reliefRequestLost). A merge, a tour, a re-plan or a member in another
// zone also end it, through mayGrowForRelief.
//
// Fewer moves before more room (moves priced: Problem.FewerMoves while
// the partition may grow): a plan that keeps the headroom only with more
// moves than one that merely fits is passed over like one that only fits
// (fewerMoves: Solution.FewerUnmet), and the partition grows for room for
// the fewer moves (relief.fewer), even past a far first fit. When its
// growth ends it asks for the headroom once more and takes the plan with
// room, however many moves it has, else what fits; it does not grow again
// (relief.off).

import "github.com/dvms-project/dvms/scheduler/fit"

// reliefState is a leader's growth for relief headroom (leading.relief).
type reliefState struct {
	// deferred: the partition passed over a solution that only fits to
	// grow for a destination with room; its request is out.
	deferred bool
	// off: its request came back (or was lost) while deferred: it solves
	// for any destination that fits from now on, or, after fewer, with
	// the headroom as before (room for more moves beats no room).
	off bool
	// fewer: it grew for room for fewer moves (Solution.FewerUnmet), a
	// plan with room but more moves in hand.
	fewer bool
}

// reliefFirstFit: a partition grows for relief headroom only when a
// solution that fits came within its first reliefFirstFit hosts. Later,
// the hosts around are tight (a saturated cloud): growing for headroom
// there holds hosts other partitions need, and finds none.
const reliefFirstFit = 3

// firstFitNear reports whether a first fit at fitAt hosts (0: none yet,
// which is near too) still lets the partition grow for relief headroom.
func firstFitNear(fitAt int) bool { return fitAt <= reliefFirstFit }

// reliefHeadroom is the relief headroom the leader's next solve asks for:
// Config.ReliefHeadroom while the partition may grow for it or once it
// grew for fewer moves, else 0 (any destination that fits).
func (a *Agent) reliefHeadroom() float64 {
	if a.mayGrowForRelief() || a.lead.relief.fewer {
		return a.cfg.ReliefHeadroom // growing may still find a host with room
	}
	return 0
}

// mayGrowForRelief reports whether the leader's partition asks for relief
// headroom: one event (not a merge), growing, before any tour or re-plan,
// smaller than ReliefPartition and than the ring, a first fit, if any,
// within reliefFirstFit hosts, and every member in one availability zone.
func (a *Agent) mayGrowForRelief() bool {
	p := a.part
	return a.cfg.ReliefHeadroom > 0 && !a.lead.relief.off && len(p.Events) == 1 && p.State == Growing && p.Tours == 0 && p.Replans == 0 &&
		len(p.Nodes) < a.cfg.ReliefPartition && len(p.Nodes) < len(a.ring) && firstFitNear(p.FitAt) &&
		a.oneZone()
}

// oneZone reports whether every member's snapshot gives the same
// availability zone (Host.Zone; "" counts as one). Growth for relief
// headroom stays inside a zone: in a multi-site region a zone is a site,
// and a partition that has reached past its site (nearest first with
// vivaldi, any order with the ring) would otherwise take a roomy host
// across the WAN where one in its site only fits. Once a member is from
// another zone the partition takes what fits, and the solver still
// prefers destinations in the source's zone (Solution.CrossZone).
func (a *Agent) oneZone() bool {
	zone, first := "", true
	for _, n := range a.part.Nodes {
		h, ok := a.lead.snaps[n]
		if !ok {
			continue
		}
		if first {
			zone, first = h.Zone, false
		} else if h.Zone != zone {
			return false
		}
	}
	return true
}

// growForRelief decides on a solution (SolveDone) whose destinations only
// fit (ReliefUnmet): unless its first fit took more than reliefFirstFit
// hosts, the partition grows for one with room instead, and
// growForRelief reports true (the solution is passed over).
func (a *Agent) growForRelief(sol Solution, planErr error) bool {
	if !sol.OK || !sol.ReliefUnmet || planErr != nil || a.lead.relief.off {
		return false // off: growth is over, what fits will do
	}
	p := a.part
	if p.FitAt == 0 {
		p.FitAt = len(p.Nodes)
	}
	if !firstFitNear(p.FitAt) && !sol.FewerUnmet {
		return false // this solution will do
	}
	a.lead.relief.deferred = true
	a.lead.relief.fewer = a.lead.relief.fewer || sol.FewerUnmet
	a.forward()
	return true
}

// reliefRequestBack: the request came back without a node (tourDone).
// When it was out for relief headroom, what fits will do (reliefDone)
// and the tour is not counted: reliefRequestBack reports true.
func (a *Agent) reliefRequestBack() bool {
	if !a.lead.relief.deferred {
		return false
	}
	a.reliefDone()
	return true
}

// reliefRequestLost: the request made no progress in time (tickLeader).
// When it was out for relief headroom, what fits will do; a new version
// makes the request stale, should it still find a node. It reports
// whether it handled the loss (else the partition is given up).
func (a *Agent) reliefRequestLost() bool {
	if !a.lead.relief.deferred {
		return false
	}
	a.part.Version++
	a.reliefDone()
	return true
}

// reliefDone ends a partition's growth for relief headroom: it solves
// for destinations that fit, on fresh snapshots.
func (a *Agent) reliefDone() {
	a.lead.relief = reliefState{off: true, fewer: a.lead.relief.fewer}
	a.broadcast(a.update()) // members answer with their snapshot
	a.collect()
}

// solveForRelief is Solve for a problem that may ask for ReliefHeadroom:
// first the destinations that keep it (the deterministic strategies
// only), then, without a solution, any that fits, said so (ReliefUnmet).
// The first search is skipped when no host is overloaded (the headroom
// changes nothing) or no possible destination has the headroom before
// receiving anything (it cannot succeed, and would explore all it can
// before saying so: a partition growing for room asks at every size).
func solveForRelief(p Problem, opt SolveOptions) Solution {
	if p.ReliefHeadroom <= 0 {
		return solveTiers(p, opt)
	}
	switch over, roomy := reliefCandidates(&p); {
	case !over: // nothing to relieve: the headroom changes nothing
		p.ReliefHeadroom = 0
		return solveTiers(p, opt)
	case roomy:
		quick := opt
		quick.Rand = nil
		if sol := solveTiers(p, quick); sol.OK {
			return fewerMoves(p, opt, sol)
		}
	}
	p.ReliefHeadroom = 0
	sol := solveTiers(p, opt)
	sol.ReliefUnmet = sol.OK
	return sol
}

// fewerMoves is solveForRelief's answer once room (a plan keeping the
// relief headroom) is found: room, unless the problem asks for fewer
// moves (Problem.FewerMoves, moves priced) and a plan that only fits
// moves fewer servers: then that one, ReliefUnmet and FewerUnmet, so the
// leader grows for a destination with room for fewer moves. Room found
// for a small overload often lies in pieces: the quiet small servers the
// priced search picks first fit the headroom where one busy server does
// not, and each is a migration.
func fewerMoves(p Problem, opt SolveOptions, room Solution) Solution {
	if !p.FewerMoves || !p.costOn() || len(room.Moves) <= 1 {
		return room
	}
	p.ReliefHeadroom = 0
	plain := solveTiers(p, opt)
	if !plain.OK || len(plain.Moves) >= len(room.Moves) {
		return room
	}
	plain.ReliefUnmet, plain.FewerUnmet = true, true
	return plain
}

// reliefCandidates reports whether a host of p is overloaded (servers
// leave it for destinations with relief headroom) and whether a possible
// destination has that headroom now, before receiving anything.
func reliefCandidates(p *Problem) (over, roomy bool) {
	m := newModel(p)
	for i := range m.hosts {
		h := &m.hosts[i]
		switch {
		case m.over(i):
			over = true
		case h.dest && fit.Fits(h.use, fit.Use{}, h.lim.Scaled(1-p.ReliefHeadroom)):
			roomy = true
		}
	}
	return over, roomy
}
