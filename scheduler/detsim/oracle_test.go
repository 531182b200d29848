package detsim

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// exactSolvable decides by brute force, independently of the solver and
// of package fit, whether the overloaded host named target can be brought
// under its thresholds by moving some of its movable servers, each to one
// other host that may receive servers, such that every receiving host
// stays within its thresholds and its placement capacity, counting all it
// receives, and no two servers of an anti-affinity group meet. It is the
// liveness oracle's oracle: small instances only (hosts^servers tries).
func exactSolvable(hosts []scheduler.Host, thr scheduler.Thresholds, target string) bool {
	ti := -1
	for i := range hosts {
		if hosts[i].Name == target {
			ti = i
		}
	}
	var movable []scheduler.Server
	for _, s := range hosts[ti].Servers {
		if !s.Fixed {
			movable = append(movable, s)
		}
	}
	type load struct{ cpu, ram, vcpus, rammb float64 }
	base := make([]load, len(hosts))
	for i, h := range hosts {
		for _, s := range h.Servers {
			base[i].cpu += s.CPU
			base[i].ram += s.RAM
		}
		base[i].vcpus, base[i].rammb = h.UsedVCPUs, h.UsedRAMMB
	}
	const slack = 1e-6
	within := func(i int, l load, alloc bool) bool {
		h := hosts[i]
		ok := l.cpu <= h.CPUs*thr.CPUOverload+slack && l.ram <= h.RAMMB*thr.RAMOverload+slack
		if alloc {
			ok = ok && l.vcpus <= h.AllocVCPUs+slack && l.rammb <= h.AllocRAMMB+slack
		}
		return ok
	}
	anti := func(i int, s scheduler.Server, assign []int) bool {
		if s.Policy != "anti-affinity" {
			return false
		}
		for _, o := range hosts[i].Servers {
			if o.Group == s.Group {
				return true
			}
		}
		for k, d := range assign {
			if d == i && movable[k].Group == s.Group && movable[k].ID != s.ID && movable[k].Policy == "anti-affinity" {
				return true
			}
		}
		return false
	}
	assign := make([]int, len(movable)) // -1: stays
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(movable) {
			loads := append([]load(nil), base...)
			for j, d := range assign {
				if d < 0 {
					continue
				}
				s := movable[j]
				loads[ti].cpu -= s.CPU
				loads[ti].ram -= s.RAM
				loads[d].cpu += s.CPU
				loads[d].ram += s.RAM
				loads[d].vcpus += float64(s.VCPUs)
				loads[d].rammb += float64(s.RAMMB)
			}
			if !within(ti, loads[ti], false) {
				return false
			}
			for j, d := range assign {
				if d >= 0 && (!within(d, loads[d], true) || anti(d, movable[j], assign[:j])) {
					return false
				}
			}
			return true
		}
		for d := -1; d < len(hosts); d++ {
			if d == ti || (d >= 0 && (hosts[d].Disabled || hosts[d].Draining)) {
				continue
			}
			assign[k] = d
			if try(k + 1) {
				return true
			}
		}
		assign[k] = -1
		return false
	}
	return try(0)
}

// randomCloud is a small cloud with exactly one overloaded host, or nil.
func randomCloud(rng *rand.Rand) []scheduler.Host {
	n := 3 + rng.Intn(2)
	hosts := make([]scheduler.Host, n)
	for i := range hosts {
		h := scheduler.Host{Name: fmt.Sprintf("h%d", i), CPUs: 4, RAMMB: 4096, AllocVCPUs: 6 + float64(rng.Intn(4)), AllocRAMMB: 8192}
		k := 1 + rng.Intn(4)
		if i == 0 {
			k = 3 + rng.Intn(3)
		}
		for j := 0; j < k; j++ {
			s := scheduler.Server{ID: fmt.Sprintf("s%d-%d", i, j), VCPUs: 1 + rng.Intn(2), RAMMB: 512 * (1 + rng.Intn(2)),
				CPU: 0.5 * float64(1+rng.Intn(5)), RAM: 256 * float64(1+rng.Intn(3))}
			if rng.Intn(6) == 0 {
				s.Group, s.Policy = "g", "anti-affinity"
			}
			h.Servers = append(h.Servers, s)
			h.UsedVCPUs += float64(s.VCPUs)
			h.UsedRAMMB += float64(s.RAMMB)
		}
		hosts[i] = h
	}
	thr := scheduler.DefaultThresholds()
	over := 0
	for i := range hosts {
		if thr.Overloaded(&hosts[i]) {
			over++
		}
		if hosts[i].UsedVCPUs > hosts[i].AllocVCPUs {
			return nil
		}
	}
	if over != 1 || !thr.Overloaded(&hosts[0]) {
		return nil
	}
	return hosts
}

// The liveness oracle (Cluster.Solvable, the solver run on the whole
// cloud) agrees with an exact search on small clouds: a solver that
// misses solutions would hide liveness misses, one that finds impossible
// ones would blame the protocol wrongly.
func TestSolvableAgainstExactSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	checked, solvable := 0, 0
	for checked < 400 {
		hosts := randomCloud(rng)
		if hosts == nil {
			continue
		}
		checked++
		want := exactSolvable(hosts, scheduler.DefaultThresholds(), "h0")
		if want {
			solvable++
		}
		got := len(New(Options{}, hosts).Solvable()) == 1
		if got != want {
			t.Fatalf("instance %d: Solvable says %v, exact search %v\n%+v", checked, got, want, hosts)
		}
	}
	t.Logf("%d instances, %d solvable", checked, solvable)
	if solvable == 0 || solvable == checked {
		t.Fatalf("instances do not discriminate: %d of %d solvable", solvable, checked)
	}
}
