package sim

import (
	"context"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

func TestParseSiteRTT(t *testing.T) {
	for _, tc := range []struct {
		in           string
		intra, inter time.Duration
		ok           bool
	}{{"1ms,40ms", time.Millisecond, 40 * time.Millisecond, true}, {" 0.5ms , 80ms", 500 * time.Microsecond, 80 * time.Millisecond, true},
		{"1ms", 0, 0, false}, {"1ms,x", 0, 0, false}} {
		a, b, err := ParseSiteRTT(tc.in)
		if (err == nil) != tc.ok || a != tc.intra || b != tc.inter {
			t.Errorf("%q: %s %s %v", tc.in, a, b, err)
		}
	}
}

// Sites over a real embedded NATS server, same seed and workload, both
// policies: the coordinates, measured on delayed probes, converge and
// estimate the modelled RTTs; the vivaldi policy keeps the protocol's
// messages inside sites far more than the ring (whose successor is in
// another site three times out of four); both are safe.
func TestSimulateSites(t *testing.T) {
	reps := map[string]*Report{}
	for _, policy := range []string{scheduler.NextRing, scheduler.NextVivaldi} {
		c := small(1)
		// The harness's own queueing adds to every measured RTT, times
		// the time scale: coordinates want a slow one.
		c.Duration, c.TimeScale, c.Sites.Warmup = 20*time.Second, 2, 30*time.Second
		c.Sites.N, c.Agent.NextNode = 4, policy
		r, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		checkSafe(t, r)
		if r.Coordinates.Pairs == 0 || r.Coordinates.Converged < 0.75 || r.Coordinates.MedianRelError > 0.5 {
			t.Fatalf("%s: coordinates %+v", policy, r.Coordinates)
		}
		if r.Events.Total == 0 {
			t.Fatalf("%s: no event: %+v", policy, r.Events)
		}
		reps[policy] = r
	}
	ring, viv := reps[scheduler.NextRing], reps[scheduler.NextVivaldi]
	t.Logf("inter-site messages ring %d vivaldi %d; migrations ring %d (%d site-solvable) vivaldi %d (%d)",
		ring.Messages.InterSite, viv.Messages.InterSite, ring.Migrations.InterSite, ring.Migrations.InterSiteSiteSolvable,
		viv.Migrations.InterSite, viv.Migrations.InterSiteSiteSolvable)
	if ring.Messages.InterSite == 0 || viv.Messages.InterSite*2 > ring.Messages.InterSite {
		t.Fatalf("inter-site messages: ring %d, vivaldi %d (want vivaldi under half)", ring.Messages.InterSite, viv.Messages.InterSite)
	}
}
