package scheduler

import (
	"errors"
	"fmt"
	"slices"
)

// Limits cap concurrent actions (DESIGN §5.5, STYLE §3).
type Limits struct {
	// PerHost is the number of concurrent outgoing live migrations per
	// host (Nova's own default max_concurrent_live_migrations is 1).
	PerHost int
	// PerPartition caps concurrent actions in one step of a plan.
	PerPartition int
}

// DefaultLimits returns 1 per host and 8 per partition.
func DefaultLimits() Limits { return Limits{PerHost: 1, PerPartition: 8} }

// Validate lists every problem.
func (l Limits) Validate() error {
	var errs []error
	if l.PerHost < 1 {
		errs = append(errs, fmt.Errorf("max_migrations_per_host %d must be >= 1", l.PerHost))
	}
	if l.PerPartition < 1 {
		errs = append(errs, fmt.Errorf("max_migrations_per_partition %d must be >= 1", l.PerPartition))
	}
	return errors.Join(errs...)
}

// ErrNoOrder means the moves cannot be ordered without overloading a host
// mid-way and no pivot host can break the cycle.
var ErrNoOrder = errors.New("scheduler: no safe order for the moves")

// BuildPlan orders moves (from Solve) into steps of parallel actions such
// that, counting every moving server on both its source and its
// destination while it moves, no host goes over its thresholds or its
// placement capacity. When moves wait on each other in a cycle, one of
// them is retargeted to a pivot host with room, which keeps every server
// to at most one move. Shelve actions come first: they only free room.
func BuildPlan(hosts []Host, moves []Action, thr Thresholds, lim Limits) (Plan, error) {
	if lim.PerHost < 1 {
		lim.PerHost = 1
	}
	if lim.PerPartition < 1 {
		lim.PerPartition = 1
	}
	m := newModel(&Problem{Hosts: hosts, Thresholds: thr})
	idx := make(map[string]int, len(hosts))
	for i := range hosts {
		idx[hosts[i].Name] = i
	}
	plan := Plan{Snapshot: hosts}
	var shelves, pending []Action
	for _, a := range moves {
		if _, ok := idx[a.From]; !ok {
			return Plan{}, fmt.Errorf("plan %s: source not in the partition", a)
		}
		switch a.Kind {
		case Shelve:
			shelves = append(shelves, a)
		case LiveMigrate:
			if _, ok := idx[a.To]; !ok {
				return Plan{}, fmt.Errorf("plan %s: destination not in the partition", a)
			}
			pending = append(pending, a)
		default:
			return Plan{}, fmt.Errorf("plan %s: unsupported action", a)
		}
	}
	for len(shelves) > 0 {
		n := min(len(shelves), lim.PerPartition)
		plan.Steps = append(plan.Steps, slices.Clone(shelves[:n]))
		for _, a := range shelves[:n] {
			s := a.asServer()
			m.remove(idx[a.From], &s)
		}
		shelves = shelves[n:]
	}
	for len(pending) > 0 {
		var step, rest []Action
		out := map[string]int{}
		for _, a := range pending {
			s := a.asServer()
			d := idx[a.To]
			if len(step) < lim.PerPartition && out[a.From] < lim.PerHost && m.fits(d, &s) {
				m.add(d, &s) // counted on both ends until the step ends
				out[a.From]++
				step = append(step, a)
				continue
			}
			rest = append(rest, a)
		}
		if len(step) == 0 {
			// Every remaining move waits on room that another remaining
			// move would free: retarget one to a pivot host.
			i, pivot, ok := findPivot(m, idx, rest)
			if !ok {
				return Plan{}, fmt.Errorf("%w: %d move(s) blocked, first %s", ErrNoOrder, len(rest), rest[0])
			}
			rest[i].To = pivot
			pending = rest
			continue
		}
		for _, a := range step {
			s := a.asServer()
			m.remove(idx[a.From], &s)
		}
		plan.Steps = append(plan.Steps, step)
		pending = rest
	}
	return plan, nil
}

// findPivot finds a move whose server fits now, and will still fit at the
// end, on a host that is neither its source nor its destination.
func findPivot(m *model, idx map[string]int, rest []Action) (int, string, bool) {
	// Final demand of each host once every remaining move is done.
	final := m.clone()
	for _, a := range rest {
		s := a.asServer()
		final.remove(idx[a.From], &s)
		final.add(idx[a.To], &s)
	}
	for i, a := range rest {
		s := a.asServer()
		best, bh := -1, -1.0
		for h := range m.hosts {
			name := m.hosts[h].h.Name
			if name == a.From || name == a.To || !m.fits(h, &s) || !final.fits(h, &s) {
				continue
			}
			if hr := m.headroom(h); hr > bh {
				best, bh = h, hr
			}
		}
		if best >= 0 {
			return i, m.hosts[best].h.Name, true
		}
	}
	return 0, "", false
}

func (a Action) asServer() Server {
	return Server{ID: a.Server, Group: a.Group, Policy: a.Policy, VCPUs: a.VCPUs, RAMMB: a.RAMMB, CPU: a.CPU, RAM: a.RAM}
}

// SolveAndPlan is the leader's whole computation for a SolveRequest:
// Solve, then, when a placement was found, BuildPlan over the same hosts
// and thresholds. planErr is BuildPlan's error (no safe order). The
// runtime, the deterministic simulator and the central baseline all call
// it, so they plan alike.
func SolveAndPlan(p Problem, lim Limits, opt SolveOptions) (sol Solution, plan Plan, planErr error) {
	sol = Solve(p, opt)
	if sol.OK {
		plan, planErr = BuildPlan(p.Hosts, sol.Moves, p.Thresholds, lim)
	}
	return sol, plan, planErr
}
