package sim

import (
	"fmt"
	"math"
	"strings"
)

// MinSolvedPct is the share of the events that had a solution a run
// must solve to pass (DESIGN §7 holds dvms to it even with a tenth of
// its agents adversarial), give or take one event: a small run of a
// dozen events is not failed for one the run's end or the timing cost.
const MinSolvedPct = 95

// Verdict is a run in one line, for a newcomer: did it keep up, was it
// safe, did it solve what could be solved, and how much overload it left
// next to the oracle's on the same cloud.
type Verdict struct {
	// Status is PASS, FAIL (Why says what failed) or NOT VALID (the run
	// did not keep up with its clock: its figures describe a starved
	// simulation, not dvms).
	Status string
	Why    []string
	// Solved of WithSolution (rounded), SolvedPct the report's figure.
	Solved, WithSolution int
	SolvedPct            float64
	// OverloadPct is the overload in percent of host-time (hosts x
	// simulated time); OraclePct the oracle's on the same cloud, seed
	// and workload, NaN when it did not run.
	OverloadPct, OraclePct float64
	Violations, Lost       int
}

// Judge makes r's verdict; oracle is the oracle's run of the same cloud
// (nil: none).
func Judge(r, oracle *Report) Verdict {
	v := Verdict{Solved: r.Events.Solved, WithSolution: int(math.Round(r.Events.WithSolution)), SolvedPct: r.Events.SolvedPct,
		OverloadPct: r.OverloadPct(), OraclePct: math.NaN(), Violations: r.Safety.Violations, Lost: r.Safety.ServersLost}
	if oracle != nil {
		v.OraclePct = oracle.OverloadPct()
	}
	if v.Violations > 0 {
		v.Why = append(v.Why, fmt.Sprintf("%d safety violations", v.Violations))
	}
	if v.Lost > 0 {
		v.Why = append(v.Why, fmt.Sprintf("%d servers lost", v.Lost))
	}
	if missed := r.Events.WithSolution - float64(r.Events.Solved); v.SolvedPct < MinSolvedPct && missed > (100-MinSolvedPct)/100.0*r.Events.WithSolution+1 {
		v.Why = append(v.Why, fmt.Sprintf("%.1f %% of the events with a solution solved, under %d %% by more than one event", v.SolvedPct, MinSolvedPct))
	}
	switch {
	case !r.Valid:
		v.Status = "NOT VALID"
		v.Why = append([]string{"the run did not keep up with its clock (fewer hosts or a lower --time-scale)"}, v.Why...)
	case len(v.Why) > 0:
		v.Status = "FAIL"
	default:
		v.Status = "PASS"
	}
	return v
}

// OverloadPct is r's overload in percent of host-time.
func (r *Report) OverloadPct() float64 {
	if r.Hosts == 0 || r.Duration <= 0 {
		return 0
	}
	return 100 * r.OverloadSeconds / (float64(r.Hosts) * r.Duration)
}

// String is the verdict line, e.g.
//
//	verdict: PASS  events solved 412/415 (99.3 %)  overload 1.8 % of host-time (oracle 1.5 %)  violations 0  lost 0
func (v Verdict) String() string {
	oracle := ""
	if !math.IsNaN(v.OraclePct) {
		oracle = fmt.Sprintf(" (oracle %.1f %%)", v.OraclePct)
	}
	line := fmt.Sprintf("verdict: %s  events solved %d/%d (%.1f %%)  overload %.1f %% of host-time%s  violations %d  lost %d",
		v.Status, v.Solved, v.WithSolution, v.SolvedPct, v.OverloadPct, oracle, v.Violations, v.Lost)
	if len(v.Why) > 0 {
		line += "  (" + strings.Join(v.Why, "; ") + ")"
	}
	return line
}

// VirtualProblems says what of c the virtual clock does not model (nil:
// it models all of it).
func (c Config) VirtualProblems() error { return c.virtualProblems() }
