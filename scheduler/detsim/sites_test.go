package detsim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// sites puts host hNNN in site NNN mod n: ring neighbours are in
// different sites, the worst case for the ring policy.
func site(h string, n int) int {
	i, err := strconv.Atoi(strings.TrimLeft(h, "h"))
	if err != nil {
		panic(h)
	}
	return i % n
}

// siteRTT is 1 ms inside a site, 40 ms between sites.
func siteRTT(n int) scheduler.DistanceFunc {
	return func(a, b string) (time.Duration, bool) {
		if site(a, n) == site(b, n) {
			return time.Millisecond, true
		}
		return 40 * time.Millisecond, true
	}
}

// sitesOptions: n sites, messages delayed by half their RTT, agents
// using next-node policy policy.
func sitesOptions(seed int64, n int, policy string) Options {
	d := siteRTT(n)
	ac := scheduler.DefaultConfig("template")
	ac.NextNode, ac.Distance = policy, d
	return Options{Seed: seed, Jitter: 2 * time.Millisecond, Agent: ac, Delay: func(from, to string) time.Duration {
		rtt, _ := d(from, to)
		return rtt / 2
	}}
}

func interSiteMoves(c *Cluster, n int) int {
	k := 0
	for _, m := range c.Moves {
		if site(m.From, n) != site(m.To, n) {
			k++
		}
	}
	return k
}

// DESIGN §5.3: with the vivaldi policy a partition fills its own site
// before it crosses to another; with the ring it goes to the ring
// successor, in another site here. h000 is overloaded by one core; h001
// (its ring successor, site 1) and h004 (site 0) have room.
func TestVivaldiStaysInSite(t *testing.T) {
	build := func() []scheduler.Host {
		return loaded(16, func(i int) int {
			switch i {
			case 0:
				return 9
			case 1, 4:
				return 4
			}
			return 8
		})
	}
	for _, tc := range []struct {
		policy string
		inter  bool
	}{{scheduler.NextRing, true}, {scheduler.NextVivaldi, false}} {
		t.Run(tc.policy, func(t *testing.T) {
			c := New(sitesOptions(1, 4, tc.policy), build())
			if !c.RunUntil(time.Minute, func() bool { return len(c.Overloaded()) == 0 && c.Idle() }) {
				t.Fatalf("still overloaded: %v", c.Overloaded())
			}
			if len(c.Violations) > 0 {
				t.Fatalf("violations: %v", c.Violations)
			}
			if got := interSiteMoves(c, 4) > 0; got != tc.inter {
				t.Fatalf("inter-site moves %d (%v), want inter-site %v", interSiteMoves(c, 4), c.Moves, tc.inter)
			}
		})
	}
}

// The vivaldi order is still a tour of the whole region: under
// saturation partitions block, merge across sites and every event with a
// solution somewhere is solved (as TestSaturatedMergesAndLiveness for the
// ring), with message loss too.
func TestVivaldiSaturatedLiveness(t *testing.T) {
	saturatedLiveness(t, func(seed int64) Options {
		opt := sitesOptions(seed, 4, scheduler.NextVivaldi)
		if seed > 5 {
			opt.Drop, opt.Dup = 0.05, 0.05
		}
		return opt
	})
}
