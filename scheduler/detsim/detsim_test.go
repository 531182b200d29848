package detsim

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// host builds a host with cpus cores, 64 GiB RAM, 4x CPU allocation.
func host(name string, cpus float64, servers ...scheduler.Server) scheduler.Host {
	return scheduler.Host{Name: name, CPUs: cpus, RAMMB: 65536, AllocVCPUs: cpus * 4, AllocRAMMB: 65536, Servers: servers}
}

// loaded is n hosts h000, h001... of 8 cores, host i with load(i)
// servers of 1 core and 512 MB, each using its core and 256 MB.
func loaded(n int, load func(i int) int) []scheduler.Host {
	hosts := make([]scheduler.Host, 0, n)
	for i := range n {
		h := host(fmt.Sprintf("h%03d", i), 8)
		for j := range load(i) {
			h.Servers = append(h.Servers, scheduler.Server{ID: fmt.Sprintf("s%d-%d", i, j), VCPUs: 1, RAMMB: 512, CPU: 1, RAM: 256})
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// solvedSafely runs c until it is idle with every event that has a
// solution somewhere solved, within limit of virtual time, and fails t
// on a violation or on such an event left unsolved.
func solvedSafely(t *testing.T, c *Cluster, limit time.Duration) {
	t.Helper()
	c.RunUntil(limit, func() bool { return c.Idle() && len(c.Solvable()) == 0 })
	if len(c.Violations) > 0 {
		t.Fatalf("violations:\n%s", strings.Join(c.Violations, "\n"))
	}
	if s := c.Solvable(); len(s) > 0 {
		t.Fatalf("unsolved despite a solution: %v", s)
	}
}

func server(id string, cpu float64) scheduler.Server {
	return scheduler.Server{ID: id, VCPUs: 2, RAMMB: 2048, CPU: cpu, RAM: 1024}
}

func TestOverloadSolvedByNeighbour(t *testing.T) {
	c := New(Options{Seed: 1}, []scheduler.Host{
		host("h1", 4, server("a", 2), server("b", 2), server("c", 1)),
		host("h2", 4, server("d", 1)),
		host("h3", 4),
	})
	if !c.RunUntil(30*time.Second, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
		t.Fatalf("overload not solved; overloaded=%v records=%d", c.Overloaded(), len(c.Records))
	}
	if got := c.Count(scheduler.RecEventEnded, scheduler.Solved); got != 1 {
		t.Errorf("solved events = %d, want 1", got)
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations: %v", c.Violations)
	}
}

func TestManySeedsSafetyAndLiveness(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			var hosts []scheduler.Host
			id := 0
			for i := 0; i < 12; i++ {
				h := host(fmt.Sprintf("h%02d", i), 8)
				for j := 0; j < 3; j++ {
					id++
					h.Servers = append(h.Servers, server(fmt.Sprintf("s%d", id), float64(rng.Intn(5))))
				}
				hosts = append(hosts, h)
			}
			c := New(Options{Seed: seed, Jitter: 3 * time.Millisecond}, hosts)
			ok := c.RunUntil(2*time.Minute, func() bool { return len(c.Overloaded()) == 0 && c.Idle() })
			if len(c.Violations) > 0 {
				t.Fatalf("violations: %s", strings.Join(c.Violations, "\n"))
			}
			if !ok {
				t.Fatalf("still overloaded after 2 min: %v", c.Overloaded())
			}
		})
	}
}

func TestSummary(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var hosts []scheduler.Host
	for i := 0; i < 12; i++ {
		h := host(fmt.Sprintf("h%02d", i), 8)
		for j := 0; j < 3; j++ {
			h.Servers = append(h.Servers, server(fmt.Sprintf("s%d-%d", i, j), float64(rng.Intn(5))))
		}
		hosts = append(hosts, h)
	}
	c := New(Options{Seed: 5}, hosts)
	before := len(c.Overloaded())
	c.RunUntil(2*time.Minute, func() bool { return len(c.Overloaded()) == 0 && c.Idle() })
	raised, ended := c.Count(scheduler.RecEventRaised, 0), c.Count(scheduler.RecEventEnded, 0)
	solved := c.Count(scheduler.RecEventEnded, scheduler.Solved)
	t.Logf("overloaded before %d after %d; raised %d ended %d solved %d msgs %d", before, len(c.Overloaded()),
		raised, ended, solved, c.Messages)
	if before == 0 {
		t.Fatal("fixture has no overload")
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations:\n%s", strings.Join(c.Violations, "\n"))
	}
	if s := c.Solvable(); len(s) > 0 {
		t.Fatalf("overloaded hosts with a solution left: %v", s)
	}
	if !c.Idle() || raised == 0 || ended != raised {
		t.Fatalf("idle %v: %d events raised, %d ended", c.Idle(), raised, ended)
	}
	if solved == 0 || len(c.Overloaded()) >= before {
		t.Fatalf("nothing solved: %d solved, overloaded %d -> %d", solved, before, len(c.Overloaded()))
	}
}

// Event-driven time: the same overload is solved, messages arrive at
// their own time (not at the next 50 ms step), so detection to plan is
// a few milliseconds after the sample that raised the event.
func TestEventDrivenSolvesAtMessageTime(t *testing.T) {
	var raised, planned time.Time
	c := New(Options{Seed: 1, EventDriven: true, OnRecord: func(r Rec) {
		switch {
		case r.Kind == scheduler.RecEventRaised && raised.IsZero():
			raised = r.At
		case r.Kind == scheduler.RecPlanned && planned.IsZero():
			planned = r.At
		}
	}}, []scheduler.Host{
		host("h1", 4, server("a", 2), server("b", 2), server("c", 1)),
		host("h2", 4, server("d", 1)),
		host("h3", 4),
	})
	if !c.RunUntil(30*time.Second, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
		t.Fatalf("overload not solved; overloaded=%v", c.Overloaded())
	}
	if len(c.Records) != 0 {
		t.Errorf("%d records kept with OnRecord set", len(c.Records))
	}
	if raised.IsZero() || planned.IsZero() {
		t.Fatalf("raised at %v, planned at %v", raised, planned)
	}
	if d := planned.Sub(raised); d <= 0 || d >= 50*time.Millisecond {
		t.Errorf("detection to plan %v: want a few message latencies (1 ms each), under one 50 ms step", d)
	}
	if c.Started != 1 || len(c.Moves) != 1 || len(c.Violations) > 0 {
		t.Errorf("started %d, moves %v, violations %v", c.Started, c.Moves, c.Violations)
	}
}

// A move whose destination filled up after the plan is skipped by the
// re-check, and the plan does not end Solved: its event still holds, so
// it is re-planned (PlanSkipped), and with no room left anywhere the
// event is given up (Unsolvable after the tours); nothing moved, nothing
// overloaded by the plan.
func TestSkippedMoveEndsAborted(t *testing.T) {
	var c *Cluster
	var ended []Rec
	spoiled, replans := false, 0
	c = New(Options{Seed: 1, EventDriven: true, Recheck: true, OnRecord: func(r Rec) {
		if r.Kind == scheduler.RecReplanning {
			replans++
		}
		if r.Kind == scheduler.RecPlanned && !spoiled {
			spoiled = true // demand rises on every other host before the move starts
			c.Hosts["h2"].Servers[0].CPU = 3.9
			c.Hosts["h3"].Servers[0].CPU = 3.9
		}
		if r.Kind == scheduler.RecEventEnded {
			ended = append(ended, r)
		}
	}}, []scheduler.Host{
		host("h1", 4, server("a", 2), server("b", 2), server("c", 1)),
		host("h2", 4, server("d", 1)),
		host("h3", 4, server("e", 0.1)),
	})
	c.Run(10 * time.Second)
	if !spoiled || len(ended) == 0 {
		t.Fatalf("no plan (spoiled %v) or no event ended", spoiled)
	}
	if e := ended[0]; e.Outcome == scheduler.Solved || replans == 0 {
		t.Errorf("first event ended %v %q after %d re-plans, want a re-plan and not solved", e.Outcome, e.Reason, replans)
	}
	if c.Started != 0 || len(c.Moves) != 0 || len(c.Violations) > 0 {
		t.Errorf("started %d, moves %v, violations %v", c.Started, c.Moves, c.Violations)
	}
}
