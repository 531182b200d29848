package sim

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
)

func small(seed int64) Config {
	c := DefaultConfig()
	c.Hosts, c.Servers, c.Seed = 40, 400, seed
	c.Duration, c.TimeScale = 40*time.Second, 20
	return c
}

func checkSafe(t *testing.T, r *Report) {
	t.Helper()
	if r.Safety.Violations != 0 || r.Safety.ServersLost != 0 {
		t.Fatalf("safety: %d violations (%v), %d servers lost", r.Safety.Violations, r.Safety.Descriptions, r.Safety.ServersLost)
	}
}

// Whole system over a real embedded NATS server, several seeds: DESIGN §8
// as the simulated cloud's observer sees it, and no event given up while
// the whole cloud had a solution.
func TestSimulateSeeds(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		r := runKeptUp(t, small(seed), protocolStarved)
		if r.Events.Total == 0 || r.Events.Solved == 0 || r.Migrations.Total == 0 {
			t.Fatalf("seed %d: nothing happened: %+v", seed, r.Events)
		}
		if r.Events.UnsolvableWithGlobal != 0 {
			t.Fatalf("seed %d: %d events given up with a solution in the cloud", seed, r.Events.UnsolvableWithGlobal)
		}
		if r.ProtocolMS.Count != r.SolveMS.Count || r.SolverMS.Count < r.SolveMS.Count || r.ProtocolMS.P50 <= 0 {
			t.Fatalf("seed %d: %d plans, %d in simulated time (p50 %v), %d solves", seed, r.SolveMS.Count, r.ProtocolMS.Count, r.ProtocolMS.P50, r.SolverMS.Count)
		}
		if r.Samples.HarnessDue != 40 || r.Samples.HarnessTicks == 0 || r.Samples.MaxGapS < 1 {
			t.Fatalf("seed %d: the observer's samples are not reported: %+v", seed, r.Samples)
		}
	}
}

// Agents killed and restarted, Nova faults injected: still safe.
func TestSimulateWithFaults(t *testing.T) {
	t.Parallel() // wall-clock bound, little CPU: overlaps the package's other long runs
	// The random workload raises about ten events in 40 simulated
	// seconds and a 10% fault rate fails many plans, so a single short
	// run on a loaded CI machine could solve none (it did): twice the
	// simulated time at half the speed, two seeds, and the requirement is
	// on their sum.
	solved := 0
	for _, seed := range []int64{4, 5} {
		c := small(seed)
		c.Duration, c.TimeScale = 80*time.Second, 10
		c.KillAgents, c.NovaFaults = 0.1, 0.1
		r := runKeptUp(t, c, protocolStarved)
		if r.Agents.Killed != 4 || r.Faults.Injected == 0 {
			t.Fatalf("seed %d: faults not exercised: killed %d, injected %d", seed, r.Agents.Killed, r.Faults.Injected)
		}
		// The observer does not wait for a killed agent to stop (it may
		// finish its plan for StopGrace, 120 s): it went 130 simulated
		// seconds without a sample at 200 hosts when it did.
		if r.Samples.MaxGapS > 30 {
			t.Fatalf("seed %d: the observer went %.1f s without a sample", seed, r.Samples.MaxGapS)
		}
		t.Logf("seed %d: %+v", seed, r.Events)
		solved += r.Events.Solved
	}
	if solved == 0 {
		t.Fatal("nothing solved under faults in two runs")
	}
}

// Saturation forces Blocked partitions to merge. Over a real NATS
// server merges depend on timing, so two seeds share the requirement;
// detsim's TestMergeNeededToSolve proves merges deterministically.
func TestSimulateSaturatedMerges(t *testing.T) {
	t.Parallel() // wall-clock bound, little CPU: overlaps the package's other long runs
	// Three seeds at least, safety checked on each; when none of them
	// merged, up to three more: beside another test run the three kept
	// up with their clock and still merged nothing (timing), while
	// broken merges merge in no run.
	merges, runs := 0, 0
	for _, seed := range []int64{3, 5, 6, 7, 8, 9} {
		if runs >= 3 && merges > 0 {
			break
		}
		runs++
		c := small(seed)
		c.Servers = 13 * c.Hosts // as issue 4's run: room is scarcer
		c.Workload = "saturated"
		// A quarter speed: under -race on a busy 2-core machine, 20x
		// starves the protocol's timeouts (partitions time out before
		// they block), and at 10x the observer missed samples in most
		// runs (29 to 35 of 40 taken, even with the machine to itself):
		// runKeptUp ran them again at 5x.
		c.TimeScale = 5
		r := runKeptUp(t, c, protocolStarved)
		t.Logf("seed %d: %d merges committed", seed, r.Merges.Committed)
		merges += r.Merges.Committed
		checkAborted(t, r)
	}
	if merges == 0 {
		t.Fatalf("no merge under saturation in %d runs", runs)
	}
}

func TestWorkloads(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(trace, []byte("time_s,server,cpu,ram_mb\n0,server-000001,1.5,0\n10,0,0.5,512\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	specs := []ServerSpec{{Name: "server-000001", VCPUs: 2, RAMMB: 1024}}
	w, err := NewWorkload(trace, specs, nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	w.Update(5*time.Second, func(_ int, cpu, _ float64) { got = append(got, cpu) })
	w.Update(10*time.Second, func(_ int, cpu, _ float64) { got = append(got, cpu) })
	if len(got) != 2 || got[0] != 1.5 || got[1] != 0.5 {
		t.Fatalf("csv workload %v", got)
	}
	// random:PERIOD: a server's demand is redrawn every PERIOD on average:
	// with 1h, a few of 200 servers change within a minute (1.7 % each); with the
	// default 30 s, most (86 %) do.
	many := make([]ServerSpec, 200)
	for i := range many {
		many[i] = ServerSpec{Name: fmt.Sprintf("s%d", i), VCPUs: 4, RAMMB: 1024}
	}
	for _, tc := range []struct {
		spec         string
		fewest, most int
	}{{"random:1h", 0, 15}, {"saturated:1h", 0, 15}, {"random", 150, 200}} {
		w, err := NewWorkload(tc.spec, many, rand.New(rand.NewSource(1)), 0, 100)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		w.Update(0, func(int, float64, float64) {})
		redrawn := 0
		w.Update(time.Minute, func(int, float64, float64) { redrawn++ })
		if redrawn < tc.fewest || redrawn > tc.most {
			t.Errorf("%s: %d of 200 servers redrawn within a minute, want %d..%d", tc.spec, redrawn, tc.fewest, tc.most)
		}
	}
	for _, spec := range []string{"random:", "random:-1s", "saturated:soon"} {
		if _, err := NewWorkload(spec, many, rand.New(rand.NewSource(1)), 0, 100); err == nil || !strings.Contains(err.Error(), "positive duration") {
			t.Errorf("%s: %v, want a period error", spec, err)
		}
	}
	bad := filepath.Join(dir, "bad.csv")
	_ = os.WriteFile(bad, []byte("0,nobody,1,1\n"), 0o600)
	if _, err := NewWorkload(bad, specs, nil, 0, 0); err == nil || !strings.Contains(err.Error(), "unknown server") {
		t.Fatalf("bad trace: %v", err)
	}
	pl := "../../../shared/traces/planetlab/planetlab-20110303.csv"
	if _, err := os.Stat(pl); err != nil {
		t.Skipf("PlanetLab traces not beside the repository (%v): CI has them in ../shared", err)
	}
	w, err = NewWorkload("planetlab:"+pl, specs, nil, 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	w.Update(0, func(_ int, cpu, _ float64) { got = append(got, cpu) })
	if len(got) != 1 || got[0] != 0.48 { // first VM, first sample 24 % of 2 vCPUs
		t.Fatalf("planetlab %v", got)
	}
}

func TestReportSVG(t *testing.T) {
	r := &Report{Hosts: 2, Series: []Sample{{T: 0, Overloaded: 1}, {T: 1, InFlight: 2}}}
	var b strings.Builder
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "<svg") || strings.Count(b.String(), "<polyline") != 3 {
		t.Fatalf("svg %q", b.String()[:80])
	}
}

// A run that did not keep up says so, and why; one that did is valid.
func TestValidity(t *testing.T) {
	kept := func() *Report {
		r := &Report{}
		r.Samples.HarnessTicks, r.Samples.HarnessDue, r.Samples.MaxGapS = 120, 120, 1.1
		r.Samples.Taken, r.Samples.Due, r.Samples.Ratio = 990, 1000, 0.99
		return r
	}
	r := kept()
	r.validity()
	if !r.Valid || len(r.InvalidBecause) != 0 {
		t.Fatalf("a run that kept up: valid %v %q", r.Valid, r.InvalidBecause)
	}
	for name, spoil := range map[string]func(*Report){
		"observer samples": func(r *Report) { r.Samples.HarnessTicks = 17 },
		"gap":              func(r *Report) { r.Samples.MaxGapS = 34 },
		"agents' samples":  func(r *Report) { r.Samples.Taken, r.Samples.Ratio = 210, 0.21 },
	} {
		r := kept()
		spoil(r)
		r.validity()
		if r.Valid || len(r.InvalidBecause) != 1 {
			t.Errorf("%s: valid %v %q", name, r.Valid, r.InvalidBecause)
		}
		var b strings.Builder
		r.WriteText(&b)
		if !strings.Contains(b.String(), "NOT VALID: "+r.InvalidBecause[0]) {
			t.Errorf("%s: the text report does not say why:\n%s", name, b.String())
		}
	}
}

// checkAborted: every aborted event is counted under a reason, and the
// ones checked against the whole cloud are at most those aborted.
func checkAborted(t *testing.T, r *Report) {
	t.Helper()
	n := 0
	for reason, k := range r.Events.AbortedBy {
		if !scheduler.EndClass(reason).Known() || scheduler.EndClass(reason).Outcome() != scheduler.Aborted || k <= 0 {
			t.Errorf("aborted by reason %q: %d", reason, k)
		}
		n += k
	}
	if n != r.Events.Aborted || r.Events.AbortedChecked > r.Events.Aborted || r.Events.AbortedWithGlobal > r.Events.AbortedChecked {
		t.Fatalf("aborted %d, by reason %v (sum %d), checked %d, with a global solution %d",
			r.Events.Aborted, r.Events.AbortedBy, n, r.Events.AbortedChecked, r.Events.AbortedWithGlobal)
	}
}

// The oracle floor: the same cloud and workload, events detected with
// the agents' K-of-N and solved over the whole cloud, plans run by the
// same executor: it solves events, safely, and its partitions are the
// cloud.
func TestSimulateOracle(t *testing.T) {
	c := small(2)
	c.Mode = "oracle"
	r := runKeptUp(t, c, protocolStarved)
	checkAborted(t, r)
	if r.Events.Solved == 0 || r.Migrations.Total == 0 || r.SolveMS.Count == 0 {
		t.Fatalf("the oracle solved nothing: %+v, %d migrations", r.Events, r.Migrations.Total)
	}
	// Which hosts a plan may use is oraclePlan's rule, tested exactly by
	// TestOraclePlanSolvesOverTheWholeCloud. Here a solve leaves out the
	// hosts running plans and the other overloaded hosts of the moment,
	// and on the wall clock that moment is the machine's: beside another
	// test run an event was detected late, beside a second overloaded
	// host, and solved over 39 of the 40. Still far beyond any agent's
	// partition.
	if r.Partitions.MaxSize > c.Hosts || r.Partitions.MaxSize < c.Hosts*3/4 || r.Messages.Total != 0 {
		t.Fatalf("oracle: partitions of up to %d hosts (want most of the cloud's %d), %d messages", r.Partitions.MaxSize, c.Hosts, r.Messages.Total)
	}
}

// The oracle solves an event over every host of the cloud but those
// running a plan and the other overloaded ones; the plan's hosts are
// then busy.
func TestOraclePlanSolvesOverTheWholeCloud(t *testing.T) {
	c := small(1)
	c.Hosts = 6
	srv := func(h string, i int, cpu float64) scheduler.Server {
		return scheduler.Server{ID: fmt.Sprintf("%s-%d", h, i), VCPUs: 2, RAMMB: 2048, CPU: cpu, RAM: 1024}
	}
	var all []scheduler.Host
	for i := range c.Hosts {
		h := scheduler.Host{Name: fmt.Sprintf("h%d", i), CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536}
		h.Servers = append(h.Servers, srv(h.Name, 0, 1))
		if i < 2 { // h0 and h1 overloaded
			h.Servers = append(h.Servers, srv(h.Name, 1, 4), srv(h.Name, 2, 4))
		}
		all = append(all, h)
	}
	ev := scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h0"}
	st := &stats{raised: map[string]time.Time{}, inFlight: map[string]bool{}, ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{},
		simNow: time.Now, raisedSim: map[string]time.Time{}}
	busy := map[string]bool{"h5": true}
	plan, used, size, ok := oraclePlan(c, ev, all, busy, rand.New(rand.NewSource(1)), st)
	if !ok || plan.Len() == 0 {
		t.Fatalf("h0's overload not solved over %d hosts", size)
	}
	if size != c.Hosts-2 { // h1 (overloaded) and h5 (busy) left out
		t.Fatalf("solved over %d hosts, want %d: all but the busy and the other overloaded", size, c.Hosts-2)
	}
	for _, h := range used {
		if h == "h1" || h == "h5" {
			t.Fatalf("the plan uses %s (busy or overloaded): %v", h, plan.Steps)
		}
		if !busy[h] {
			t.Fatalf("%s used by the plan but not marked busy", h)
		}
	}
	delete(busy, "h5")
	all[1].Servers = all[1].Servers[:1] // h1 no longer overloaded
	if _, _, size, _ := oraclePlan(c, ev, all, map[string]bool{}, rand.New(rand.NewSource(1)), st); size != c.Hosts {
		t.Fatalf("nothing busy, one host overloaded: solved over %d hosts, want the cloud's %d", size, c.Hosts)
	}
}

// --vcpu-overcommit fills every host with small servers to that many
// vCPUs per core, and placement leaves room for moves.
func TestOvercommitFillsHosts(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.HostCPUs, c.Overcommit = 5, 16, PlanetLabOvercommit
	cloud := fake.New(fake.DefaultConfig(), fake.NewManualClock(time.Unix(0, 0)))
	hosts, specs, err := build(cloud, c, rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range hosts {
		v := 0
		for _, s := range cloud.ServersOn(h) {
			v += s.VCPUs
			if s.RAMMB != 512*s.VCPUs {
				t.Fatalf("server %s: %d MB for %d vCPUs", s.ID, s.RAMMB, s.VCPUs)
			}
		}
		if v != 96 {
			t.Fatalf("%s carries %d vCPUs, want 6 x 16", h, v)
		}
		n += len(cloud.ServersOn(h))
		nh, err := cloud.Host(context.Background(), h)
		if err != nil || nh.CPUAllocRatio != placementRatio*PlanetLabOvercommit {
			t.Fatalf("%s: placement ratio %v (%v)", h, nh.CPUAllocRatio, err)
		}
	}
	if n != len(specs) {
		t.Fatalf("%d servers placed, %d specs", n, len(specs))
	}
	c.Overcommit, c.HostRAMMB = 20, 65536 // 320 vCPUs of 512 MB: 160 GB
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--vcpu-overcommit") {
		t.Fatalf("overcommit beyond the hosts' RAM: %v", err)
	}
}
