package detsim

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// redraws is `dvms simulate --workload saturated` in small: every server's
// CPU demand is a fraction of its vCPUs drawn from a clipped normal law
// around mean, redrawn at exponentially spaced times (30 s on average).
type redraws struct {
	rng  *rand.Rand
	mean float64
	next map[string]time.Time
}

// saturatedCloud places servers of 1, 2 or 4 vCPUs at random on hosts of
// 16 cores and returns the workload that loads the cloud to 97 %.
func saturatedCloud(rng *rand.Rand, hosts, servers int) ([]scheduler.Host, *redraws) {
	hs := make([]scheduler.Host, hosts)
	for i := range hs {
		hs[i] = scheduler.Host{Name: fmt.Sprintf("c%03d", i), CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536}
	}
	vcpus := 0
	for k := 0; k < servers; k++ {
		v := []int{1, 2, 4}[rng.Intn(3)]
		s := scheduler.Server{ID: fmt.Sprintf("s%04d", k), VCPUs: v, RAMMB: 1024 * v, RAM: 0.7 * float64(1024*v)}
		for range 50 {
			h := &hs[rng.Intn(hosts)]
			if h.UsedVCPUs+float64(v) <= h.AllocVCPUs && h.UsedRAMMB+float64(s.RAMMB) <= h.AllocRAMMB {
				h.Servers = append(h.Servers, s)
				h.UsedVCPUs += float64(v)
				h.UsedRAMMB += float64(s.RAMMB)
				vcpus += v
				break
			}
		}
	}
	w := &redraws{rng: rng, mean: math.Min(1, 0.97*16*float64(hosts)/float64(vcpus)), next: map[string]time.Time{}}
	return hs, w
}

// apply redraws the demand of the servers whose time has come.
func (w *redraws) apply(c *Cluster) {
	for _, n := range c.names {
		h := c.Hosts[n]
		for k := range h.Servers {
			s := &h.Servers[k]
			if t, ok := w.next[s.ID]; ok && c.Now.Before(t) {
				continue
			}
			s.CPU = float64(s.VCPUs) * math.Max(0, math.Min(1, w.mean+0.15*w.rng.NormFloat64()))
			w.next[s.ID] = c.Now.Add(time.Duration(w.rng.ExpFloat64() * float64(30*time.Second)))
		}
	}
}

// Issue 11, point 6, at the simulator's scale (200 hosts, 2,600 servers,
// saturated, one simulated minute): at first every overloaded host starts
// its own partition, so a request crosses a hundred busy partitions
// before it finds a free node. No request is called lost while it
// travels, no event is given up that the partitions blocked around it
// could have solved together, and safety holds (the executor's re-checks
// on, as in the runtime).
func TestSaturatedAtScale(t *testing.T) {
	t.Parallel() // CPU-bound and deterministic
	if testing.Short() {
		t.Skip("one simulated minute of 200 agents: not in -short")
	}
	rng := rand.New(rand.NewSource(3))
	hosts, w := saturatedCloud(rng, 200, 2600)
	c := New(Options{Seed: 3, Latency: 2 * time.Millisecond, Jitter: 3 * time.Millisecond, Recheck: true}, hosts)
	blocked := map[string]Rec{}
	seen, lost, union := 0, 0, 0
	for i := 0; i < 60*20; i++ { // 60 s of 50 ms steps
		if i%20 == 0 {
			w.apply(c)
		}
		c.Step()
		for ; seen < len(c.Records); seen++ {
			r := c.Records[seen]
			switch {
			case r.Kind == scheduler.RecBlocked:
				blocked[r.Partition] = r
			case r.Kind == scheduler.RecDissolved && r.Class == scheduler.EndRequestLost:
				lost++
			case r.Kind == scheduler.RecEventEnded && r.Outcome == scheduler.Unsolvable:
				nodes := slices.Clone(r.Nodes)
				for id, b := range blocked {
					if id != r.Partition && c.Now.Sub(b.At) < 5*time.Second {
						nodes = append(nodes, b.Nodes...)
					}
				}
				var sub []scheduler.Host
				for _, h := range c.Snapshot() {
					if slices.Contains(nodes, h.Name) {
						sub = append(sub, h)
					}
				}
				sol := scheduler.Solve(scheduler.Problem{Events: []scheduler.Event{r.Event}, Hosts: sub, Thresholds: scheduler.DefaultThresholds()}, scheduler.DefaultSolveOptions())
				if sol.OK && len(sol.Moves) > 0 {
					union++
				}
			}
		}
	}
	raised, solved := c.Count(scheduler.RecEventRaised, 0), c.Count(scheduler.RecEventEnded, scheduler.Solved)
	t.Logf("raised %d, solved %d, unsolvable %d, aborted %d, re-plans %d, blocked %d, merges %d, requests lost %d", raised, solved,
		c.Count(scheduler.RecEventEnded, scheduler.Unsolvable), c.Count(scheduler.RecEventEnded, scheduler.Aborted), c.Count(scheduler.RecReplanning, 0),
		len(blocked), c.Count(scheduler.RecMergeCommitted, 0), lost)
	reasons := map[string]int{}
	for _, r := range c.Records {
		if r.Kind == scheduler.RecEventEnded && r.Outcome == scheduler.Aborted {
			reasons[strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '*'
				}
				return r
			}, r.Reason)]++
		}
	}
	t.Logf("aborted by reason: %v", reasons)
	if len(c.Violations) > 0 {
		t.Fatalf("violations:\n%s", strings.Join(c.Violations, "\n"))
	}
	if lost > 0 || union > 0 {
		t.Fatalf("%d requests called lost while travelling, %d events given up with a solution in the union", lost, union)
	}
	if solved < raised/2 {
		t.Fatalf("only %d of %d events solved", solved, raised)
	}
}
