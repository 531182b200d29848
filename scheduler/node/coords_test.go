package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Vivaldi coordinates from probes over a real NATS server whose
// deliveries are held by the sites' RTT (one way: half of it): once they
// converge, the estimated RTT tells a host's site-mates from the others.
func TestVivaldiSeparatesSites(t *testing.T) {
	natsURL := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n, sites = 12, 3
	site := func(h string) int {
		var i int
		fmt.Sscanf(h, "h%d", &i)
		return i % sites
	}
	rtt := func(a, b string) time.Duration {
		if site(a) == site(b) {
			return 2 * time.Millisecond
		}
		return 200 * time.Millisecond
	}
	var hosts []string
	for i := 0; i < n; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d", i))
	}
	table := node.NewCoordTable()
	cfg := node.DefaultCoordConfig()
	cfg.Probe = 20 * time.Millisecond
	var wg sync.WaitGroup
	var vs []*node.Vivaldi
	for i, h := range hosts {
		nc, err := bus.ConnectNATS(ctx, bus.Config{URL: natsURL, Name: h})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		d := bus.NewDelayed(nc, func(subject string) time.Duration {
			if to := bus.SubjectHost(subject); to != "" {
				return rtt(h, to) / 2
			}
			return 0
		})
		defer d.Close()
		v, err := node.NewVivaldi(cfg, "t", h, d, node.Wall{}, table, int64(i), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		v.SetPeers(hosts)
		vs = append(vs, v)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := v.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	dist := table.Distance(cfg.MaxError)
	// medians of the estimates inside and between sites, ok once every
	// coordinate is used.
	medians := func() (intra, inter time.Duration, ok bool) {
		var in, out []time.Duration
		for _, a := range hosts {
			for _, b := range hosts {
				if a == b {
					continue
				}
				d, known := dist(a, b)
				if !known {
					return 0, 0, false
				}
				if site(a) == site(b) {
					in = append(in, d)
				} else {
					out = append(out, d)
				}
			}
		}
		slices.Sort(in)
		slices.Sort(out)
		return in[len(in)/2], out[len(out)/2], true
	}
	// The machine's load adds to every RTT (tens of ms under -race on a
	// shared machine), so the sites are far apart and the check is on
	// their order; a stall is a sample of seconds: wait until the
	// coordinates agree with the sites, as they do once it passes.
	var mi, me time.Duration
	separated := func() bool {
		var ok bool
		mi, me, ok = medians()
		return ok && me-mi > 100*time.Millisecond // true gap 198 ms; load adds to both
	}
	if !waitFor(t, 30*time.Second, separated) {
		t.Fatalf("after 30 s (samples of h0: %d): median estimate intra-site %s (true 2ms), inter-site %s (true 200ms)", vs[0].Samples(), mi, me)
	}
	t.Logf("median estimate: intra-site %s (true 2ms), inter-site %s (true 200ms)", mi, me)
}

// A coordinate is used once its error estimate has been at or below the
// bound, and stays used when the estimate rises again (a few queued
// samples); one that never got there is not.
func TestCoordTableDistanceOnceConverged(t *testing.T) {
	table := node.NewCoordTable()
	at := func(x, errEst float64) *coordinate.Coordinate {
		c := coordinate.NewCoordinate(coordinate.DefaultConfig())
		c.Vec[0] = x
		c.Error = errEst
		return c
	}
	dist := table.Distance(0.75)
	table.Set("a", at(0, 1.5))
	table.Set("b", at(0.02, 1.5))
	if _, ok := dist("a", "b"); ok {
		t.Fatal("distance known between coordinates that never converged")
	}
	table.Set("a", at(0, 0.3))
	table.Set("b", at(0.02, 0.4))
	d, ok := dist("a", "b")
	if !ok || d < 15*time.Millisecond || d > 25*time.Millisecond {
		t.Fatalf("converged: distance %v, %v; want about 20ms, true", d, ok)
	}
	table.Set("a", at(0, 1.2)) // a's estimate wanders above the bound
	if d, ok := dist("a", "b"); !ok || d < 15*time.Millisecond {
		t.Fatalf("after a's error rose: distance %v, %v; want it still known", d, ok)
	}
	table.Forget("a")
	table.Set("a", at(0, 1.2)) // back after it left: converges anew
	if _, ok := dist("a", "b"); ok {
		t.Fatal("a rejoined with an unconverged coordinate and its distance is known")
	}
}
