package sim

import (
	"context"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler/oscillation"
)

// The region-wide count: a server moved back within the window, one
// moved on again, one moved again only after the window; a move that
// starts within server_cooldown of the previous one's end is a violation.
func TestOscillationsCountsMovesAndCooldown(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(min float64) time.Time { return t0.Add(time.Duration(min * float64(time.Minute))) }
	moves := []regionMove{
		{server: "back", from: "a", to: "b", start: at(0), end: at(1)},
		{server: "back", from: "b", to: "a", start: at(12), end: at(13)}, // back after 11 min
		{server: "on", from: "a", to: "b", start: at(0), end: at(1)},
		{server: "on", from: "b", to: "c", start: at(25), end: at(26)}, // on after 24 min
		{server: "late", from: "a", to: "b", start: at(0), end: at(1)},
		{server: "late", from: "b", to: "a", start: at(40), end: at(41)}, // back after 39 min: outside the window
	}
	cfg := oscillation.Config{Events: 3, Window: 30 * time.Minute}
	o := oscillations(cfg, 20*time.Minute, moves, nil)
	if o.ServerMovedBack != 1 || o.MovedAgain != 2 || o.CooldownViolations != 1 || len(o.Descriptions) != 1 || !strings.HasPrefix(o.Descriptions[0], "back moved b to a 660 s after") {
		t.Fatalf("%+v", o)
	}
	if o := oscillations(cfg, 0, moves, nil); o.CooldownViolations != 0 {
		t.Fatalf("cooldown off: %+v", o)
	}

	now := t0
	rel := newReliefs(cfg, func() time.Time { return now })
	for i := 0; i < 4; i++ {
		now = at(float64(5 * i))
		rel.relieved("h1")
		rel.relieved("h2")
	}
	rel.relieved("h2")
	rel.relieved("h2") // its sixth: a second detection
	rel.relieved("h3")
	if o := oscillations(cfg, 0, nil, rel); o.HostRelieved != 3 || o.Hosts != 2 {
		t.Fatalf("reliefs: %+v, want h1 once and h2 twice", o)
	}
}

// flapping: a quarter of the servers swing between FlapLow and FlapHigh
// each half period, the others keep their demand.
func TestFlappingWorkload(t *testing.T) {
	servers := make([]ServerSpec, 2000)
	for i := range servers {
		servers[i] = ServerSpec{Name: "s", VCPUs: 2, RAMMB: 1024}
	}
	wl, err := NewWorkload("flapping:4m", servers, rand.New(rand.NewSource(1)), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cpu := make([]float64, len(servers))
	sets := 0
	at := func(d time.Duration) {
		sets = 0
		wl.Update(d, func(i int, c, ram float64) { cpu[i], sets = c, sets+1 })
	}
	at(0)
	first := append([]float64(nil), cpu...)
	at(2 * time.Minute) // every flapping server flipped once
	flapping := 0
	for i := range cpu {
		switch {
		case cpu[i] == first[i]:
		case cpu[i]+first[i] == 2*(FlapLow+FlapHigh) && (cpu[i] == 2*FlapLow || cpu[i] == 2*FlapHigh):
			flapping++
		default:
			t.Fatalf("server %d went from %v to %v", i, first[i], cpu[i])
		}
	}
	if flapping != sets || flapping < 400 || flapping > 600 {
		t.Fatalf("%d servers flipped (%d set), want about a quarter of %d", flapping, sets, len(servers))
	}
	if at(2*time.Minute + time.Second); sets > flapping/10 {
		t.Fatalf("%d servers set a second later", sets)
	}
	for _, bad := range []string{"flapping:0s", "flapping:x"} {
		if _, err := NewWorkload(bad, servers, rand.New(rand.NewSource(1)), 0, 0); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

// On the virtual clock, the flapping workload moves servers again within
// the window; with server_cooldown the agents move none again within it
// (the observer would count each as a violation); with a move cost no
// relief pays for itself, and the events end not_worth; with a
// destination peak window relief moves otherwise.
func TestVirtualFlappingCooldownAndMoveCost(t *testing.T) {
	cfg := func() Config {
		c := DefaultConfig()
		c.Clock, c.Hosts, c.Servers, c.Duration, c.Seed, c.Workload = ClockVirtual, 40, 480, 5*time.Minute, 1, "flapping:2m"
		return c
	}
	off, err := Run(context.Background(), cfg())
	if err != nil {
		t.Fatal(err)
	}
	if o := off.Oscillations; o == nil || o.MovedAgain == 0 || o.CooldownViolations != 0 || off.Safety.Violations != 0 {
		t.Fatalf("off: %+v, %d migrations, safety %+v: want servers moved again", o, off.Migrations.Total, off.Safety)
	}
	c := cfg()
	c.Agent.ServerCooldown = 30 * time.Minute
	on, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if o := on.Oscillations; o == nil || on.Migrations.Total == 0 || o.MovedAgain != 0 || o.CooldownViolations != 0 || on.Safety.Violations != 0 {
		t.Fatalf("cooldown: %+v, %d migrations, safety %+v", o, on.Migrations.Total, on.Safety)
	}
	// The destination peak window: the agents' profiles change where
	// relief moves servers (peak.go), and nothing is unsafe.
	c = cfg()
	c.Agent.DestinationPeakWindow = 2 * time.Minute
	peak, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if peak.Migrations.Total == 0 || peak.Safety.Violations != 0 || peak.Migrations.Total == off.Migrations.Total && peak.OverloadSeconds == off.OverloadSeconds {
		t.Fatalf("peak window: %d migrations (off %d), overload %v s (off %v), safety %+v", peak.Migrations.Total, off.Migrations.Total, peak.OverloadSeconds, off.OverloadSeconds, peak.Safety)
	}
	c = cfg()
	c.Agent.MoveCost = 1000
	priced, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if priced.Migrations.Total != 0 || priced.Events.EndedBy["aborted/not_worth"] == 0 {
		t.Fatalf("priced out: %d migrations, ended %v", priced.Migrations.Total, priced.Events.EndedBy)
	}
}
