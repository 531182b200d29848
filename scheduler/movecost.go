package scheduler

import (
	"fmt"
	"math"
	"time"
)

// Moves that pay for themselves: relief and consolidation propose a plan
// only when what it gains is worth what its moves cost. Drains always go.
//
// Gain is in points: percent of a host's capacity. A plan that relieves
// an overloaded host gains how far that host's demand is above its
// overload threshold (CPU or RAM, whichever is further: a host at 91 %
// CPU with an 85 % threshold is 6 points over) times the LastingUnits
// the overload is expected to last (at least one: lasting, overFor); a
// plan that empties an underloaded host gains 100 (the whole host freed).
//
// Cost is in the same points: each live migration costs MoveCost plus
// MoveCostPerSecond for every second the migration is predicted to take
// (SolveOptions.Migrations: the guest's RAM over its host pair's
// bandwidth less the guest's dirty rate, learnt from recent migrations;
// without a model, RAM at FallbackMigrationMBps). A shelve costs
// MoveCost.
//
// The rule: a plan (of a problem without a Maintenance event) whose total
// cost exceeds its total gain is refused (Solution.NotWorth); the event
// ends Aborted, class not_worth, and is raised again after
// retry_backoff if it still holds (a not_worth end does not double the
// backoff, end.go: the refusal judged the overload's moment). With
// either cost set, the solver also ranks solutions by cost (after moves
// that do not converge and moves across zones) instead of by bytes
// moved, and tries evicting the servers with the most CPU per point of
// cost first: relief picks small, quiet servers before big or busy ones;
// and a partition that may grow for relief headroom grows for room for
// fewer moves (relief.go: fewerMoves).

// FallbackMigrationMBps is the bandwidth the move cost assumes without a
// migration model (migest's default before any observation).
const FallbackMigrationMBps = 1000

// costOn says whether p prices moves.
func (p *Problem) costOn() bool { return p.MoveCost > 0 || p.MoveCostPerSecond > 0 }

// moveSeconds is a's predicted migration time in seconds.
func (s *search) moveSeconds(a Action) float64 {
	if s.opt.Migrations != nil {
		d, _ := s.opt.Migrations.Migration(a)
		return d.Seconds()
	}
	return float64(a.RAMMB) / FallbackMigrationMBps
}

// actionCost is what one action costs, in points.
func (s *search) actionCost(a Action) float64 {
	if a.Kind != LiveMigrate {
		return s.p.MoveCost
	}
	return s.p.MoveCost + s.p.MoveCostPerSecond*s.moveSeconds(a)
}

// serverCost is what moving sv off host src costs wherever it goes (the
// site-wide bandwidth): the eviction order's and the exact search's.
func (s *search) serverCost(src int, sv *Server) float64 {
	return s.actionCost(moveAction(sv, s.base.hosts[src].h.Name, ""))
}

// overPoints is how far host i of m is above its overload threshold, in
// percent of its capacity (0 when it is not).
func overPoints(m *model, i int) float64 {
	h := &m.hosts[i]
	pts := 0.0
	if h.h.CPUs > 0 {
		pts = max(pts, (h.use.CPU-h.lim.CPU)/h.h.CPUs*100)
	}
	if h.h.RAMMB > 0 {
		pts = max(pts, (h.use.RAM-h.lim.RAM)/h.h.RAMMB*100)
	}
	return pts
}

// LastingUnit: a point of cost weighs a point of overload for this long.
// An overload expected to last longer counts as many times over as it
// lasts LastingUnits (lasting).
const LastingUnit = 20 * time.Second

// lasting is how many times an overload expected to last d counts: 1
// up to LastingUnit, d/LastingUnit past it. An overload is expected to
// last about as long again as it has held (the longer it has held, the
// less it is a swing about to turn), and a swing that came within the
// peak window to come again. One that a plan did not pay for is raised
// again after the retry backoff and, while it holds or keeps coming
// back, its gain grows until it pays: a move cost never leaves a host
// overloaded for good.
func lasting(d time.Duration) float64 { return max(1, float64(d)/float64(LastingUnit)) }

// overFor is how long host i is expected to stay overloaded: as long as
// its overload has held (Host.OverFor), or, with profiles, as long as its
// profile was over its limit within the window if that is longer (a
// swing that overloads it comes back with the window).
func (s *search) overFor(i int) time.Duration {
	h := s.base.hosts[i].h
	return max(h.OverFor, time.Duration(s.base.overSteps(i))*h.ProfileStep)
}

// EmptiedHostGain is the gain, in points, of emptying an underloaded host.
const EmptiedHostGain = 100

// pays prices the best solution: its Gain and Cost, and NotWorth when the
// cost exceeds the gain (never for a drain).
func (s *search) pays() {
	if !s.p.costOn() || !s.found {
		return
	}
	gain := 0.0
	for _, i := range s.over {
		gain += overPoints(s.base, i) * lasting(s.overFor(i))
	}
	emptied := map[string]bool{}
	for _, e := range s.ev0 {
		if !e.consolidate {
			return // a drain: it always goes
		}
		emptied[s.base.hosts[e.src].h.Name] = true
	}
	gain += EmptiedHostGain * float64(len(emptied))
	cost := 0.0
	for _, a := range s.best.Moves {
		cost += s.actionCost(a)
	}
	s.best.Gain, s.best.Cost = round2(gain), round2(cost)
	if cost > gain {
		s.best = Solution{NotWorth: true, Gain: s.best.Gain, Cost: s.best.Cost, Unmovable: s.unmovable,
			Reason: join(fmt.Sprintf("not worth it: %d move(s) cost %.1f points for a gain of %.1f", len(s.best.Moves), cost, gain), s.note)}
	}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
