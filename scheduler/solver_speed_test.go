package scheduler

import (
	"slices"
	"testing"
	"time"
)

// A clone shares its hosts' profiles and anti-affinity counts with the
// model it came from until either changes them: a change on one side
// never shows on the other.
func TestModelCloneSharesUntilChanged(t *testing.T) {
	anti := Server{ID: "a", VCPUs: 1, RAMMB: 1024, CPU: 0.5, RAM: 100, PeakCPU: 0.5, Profile: flat(0.5), Group: "g", Policy: "anti-affinity"}
	p := Problem{Hosts: []Host{profiledHost("h0", anti), profiledHost("h1")}, Thresholds: DefaultThresholds()}
	base := newModel(&p)
	base.withProfiles(&p, true)
	prof0, anti0 := slices.Clone(base.hosts[0].prof), base.hosts[0].anti["g"]

	c := base.clone()
	mover := Server{ID: "m", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 100, PeakCPU: 1, Profile: flat(1), Group: "g", Policy: "anti-affinity"}
	c.add(0, &mover)
	if !slices.Equal(base.hosts[0].prof, prof0) || base.hosts[0].anti["g"] != anti0 {
		t.Fatalf("the clone's add changed the original: profile %v (was %v), anti %d (was %d)", base.hosts[0].prof, prof0, base.hosts[0].anti["g"], anti0)
	}
	if c.hosts[0].prof[0] != prof0[0]+1 || c.hosts[0].anti["g"] != anti0+1 {
		t.Fatalf("the clone's add is missing: profile %v, anti %d", c.hosts[0].prof, c.hosts[0].anti["g"])
	}
	cprof := slices.Clone(c.hosts[0].prof)
	base.remove(0, &anti)
	if !slices.Equal(c.hosts[0].prof, cprof) || c.hosts[0].anti["g"] != anti0+1 {
		t.Fatalf("the original's remove changed the clone: profile %v (was %v), anti %d", c.hosts[0].prof, cprof, c.hosts[0].anti["g"])
	}
}

// The exact search skips the subsets of an overloaded host's servers
// with one that fits no destination on its own: loneFits marks the
// servers that fit somewhere, the way bestDest would place them.
func TestExactLoneFits(t *testing.T) {
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "huge", VCPUs: 4, RAMMB: 1024, CPU: 3.5, RAM: 100},
		{ID: "s1", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 100},
		{ID: "s2", VCPUs: 1, RAMMB: 2048, CPU: 1, RAM: 100},
	}}
	dst := Host{Name: "dst", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "d", VCPUs: 2, RAMMB: 1024, CPU: 2, RAM: 100},
	}}
	p := Problem{Events: []Event{{Kind: Overload, Host: "src"}}, Hosts: []Host{src, dst}, Thresholds: DefaultThresholds()}
	s := &search{p: &p, opt: DefaultSolveOptions(), base: newModel(&p)}
	cands := []*Server{&p.Hosts[0].Servers[0], &p.Hosts[0].Servers[1], &p.Hosts[0].Servers[2]}
	if got := s.loneFits(0, cands); got != 0b110 {
		t.Fatalf("loneFits = %03b, want 110 (huge fits nowhere, s1 and s2 fit dst)", got)
	}
	// huge alone would fix src with the fewest bytes; s1 and s2 are what
	// fits.
	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK || sol.MovedMB != 3072 || len(sol.Moves) != 2 {
		t.Fatalf("solution %+v, want s1 and s2 to dst", sol)
	}
}

// countingModel predicts every move converges in a second and counts the
// questions about moving server s (of a host no plan relieves) to host
// to: only the sweep of mayNotConverge asks those.
type countingModel struct {
	s, to string
	n     int
}

func (c *countingModel) Migration(a Action) (time.Duration, bool) {
	if a.Server == c.s && a.To == c.to {
		c.n++
	}
	return time.Second, true
}

// Whether some move may not converge is asked once per Solve, not again
// by its peak pass: every server to every host is a large partition's
// most expensive question.
func TestSolveAsksConvergenceOnce(t *testing.T) {
	p := Problem{Events: []Event{{Kind: Overload, Host: "src"}}, Hosts: peakHosts(2.5), Thresholds: DefaultThresholds(), MoveCost: 0.5}
	// No destination fits at peaks (the peak pass fails), flappy does now.
	mm := &countingModel{s: "s", to: "flappy"} // s is steady's
	opt := DefaultSolveOptions()
	opt.Migrations = mm
	if sol := Solve(p, opt); !sol.OK {
		t.Fatalf("no solution: %+v", sol)
	}
	if mm.n != 1 {
		t.Fatalf("the model was asked %d times about s to flappy, want once", mm.n)
	}
}
