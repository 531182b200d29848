package node_test

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler/node"
)

// The watch's decision on one listing: the first listing publishes every
// service (none changed), a later one only what changed, a republish
// everything.
func TestWatchStep(t *testing.T) {
	up := func(h string) nova.Service {
		return nova.Service{Host: h, Status: nova.ServiceEnabled, State: nova.ServiceUp}
	}
	drained := up("h2")
	drained.Status, drained.DisabledReason = nova.ServiceDisabled, "dvms:maintenance"
	known := map[string]nova.Service{}
	got := func(ns []node.Notice) (out []string) {
		for _, n := range ns {
			s := n.Service.Host
			if n.Changed {
				s += " changed"
			}
			out = append(out, s)
		}
		return out
	}
	for _, step := range []struct {
		svcs []nova.Service
		all  bool
		want []string
	}{
		{svcs: []nova.Service{up("h1"), up("h2")}, want: []string{"h1", "h2"}},
		{svcs: []nova.Service{up("h1"), up("h2")}, want: nil},
		{svcs: []nova.Service{up("h1"), drained}, want: []string{"h2 changed"}},
		{svcs: []nova.Service{up("h1"), drained, up("h3")}, want: []string{"h3"}},
		{svcs: []nova.Service{up("h1"), drained, up("h3")}, all: true, want: []string{"h1", "h2", "h3"}},
	} {
		if g := got(node.WatchStep(known, step.svcs, step.all)); !slices.Equal(g, step.want) {
			t.Errorf("listing %v (all %v): published %v, want %v", step.svcs, step.all, g, step.want)
		}
	}
}

// The monitor's refresh schedule: everything at first, the servers every
// Refresh and the placement every PlacementRefresh (±10 %), the servers
// at once when asked, everything when forced.
func TestRefreshSchedule(t *testing.T) {
	cfg := node.DefaultConfig() // Refresh 1 min, PlacementRefresh 10 min
	jitter := rand.New(rand.NewSource(1))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s node.Refresh
	step := func(at time.Duration, forced, servers bool) string {
		p, sv := s.Due(t0.Add(at), forced, servers)
		s.Read(t0.Add(at), p, sv, cfg, jitter)
		switch {
		case p && sv:
			return "all"
		case sv:
			return "servers"
		case p:
			return "placement"
		}
		return "-"
	}
	for _, c := range []struct {
		at              time.Duration
		forced, servers bool
		want            string
	}{
		{at: 0, want: "all"},
		{at: 30 * time.Second, want: "-"},
		{at: 31 * time.Second, servers: true, want: "servers"},
		{at: 80 * time.Second, want: "-"}, // 49 s after the last servers read
		{at: 98 * time.Second, want: "servers"},
		{at: 99 * time.Second, forced: true, want: "all"},
		{at: 99*time.Second + 8*time.Minute, want: "servers"},
		{at: 99*time.Second + 11*time.Minute, want: "all"},
	} {
		if got := step(c.at, c.forced, c.servers); got != c.want {
			t.Errorf("at %s (forced %v, servers %v): read %s, want %s", c.at, c.forced, c.servers, got, c.want)
		}
	}
}
