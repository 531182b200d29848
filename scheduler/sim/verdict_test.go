package sim

import (
	"math"
	"testing"
)

// The verdict passes a valid, safe run that solved enough of what had a
// solution, and names every reason it does not.
func TestJudge(t *testing.T) {
	good := func() *Report {
		r := &Report{Hosts: 100, Duration: 60, Valid: true, OverloadSeconds: 108}
		r.Events.Solved, r.Events.WithSolution, r.Events.SolvedPct = 412, 415, 99.28
		return r
	}
	oracle := &Report{Hosts: 100, Duration: 60, OverloadSeconds: 90}
	v := Judge(good(), oracle)
	const want = "verdict: PASS  events solved 412/415 (99.3 %)  overload 1.8 % of host-time (oracle 1.5 %)  violations 0  lost 0"
	if v.Status != "PASS" || v.String() != want {
		t.Errorf("got %q\nwant %q", v, want)
	}
	if v := Judge(good(), nil); !math.IsNaN(v.OraclePct) || v.String() != "verdict: PASS  events solved 412/415 (99.3 %)  overload 1.8 % of host-time  violations 0  lost 0" {
		t.Errorf("without the oracle: %q", v)
	}
	for _, tc := range []struct {
		name, status string
		mutate       func(*Report)
	}{
		{"violation", "FAIL", func(r *Report) { r.Safety.Violations = 1 }},
		{"lost", "FAIL", func(r *Report) { r.Safety.ServersLost = 2 }},
		{"too few solved", "FAIL", func(r *Report) { r.Events.Solved, r.Events.SolvedPct = 393, 94.7 }},
		{"one event short in a small run", "PASS", func(r *Report) { r.Events.Solved, r.Events.WithSolution, r.Events.SolvedPct = 12, 13, 92.3 }},
		{"two events short in a small run", "FAIL", func(r *Report) { r.Events.Solved, r.Events.WithSolution, r.Events.SolvedPct = 11, 13, 84.6 }},
		{"starved", "NOT VALID", func(r *Report) { r.Valid = false }},
	} {
		r := good()
		tc.mutate(r)
		if v := Judge(r, oracle); v.Status != tc.status || len(v.Why) != map[bool]int{true: 0, false: 1}[tc.status == "PASS"] {
			t.Errorf("%s: %s %q, want %s", tc.name, v.Status, v.Why, tc.status)
		}
	}
}
