package detsim

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// A plan given while another's long migration is in flight starts at
// once, not when that migration ends: the cluster keeps the earliest end
// of its plans' steps (it does not walk every plan at every step) and a
// new plan is due at once.
func TestPlanStartsWhileAnotherMigrates(t *testing.T) {
	srv := func(id string, ram int) scheduler.Server {
		return scheduler.Server{ID: id, VCPUs: 1, RAMMB: ram, CPU: 0.5, RAM: float64(ram) / 2}
	}
	hst := func(name string, servers ...scheduler.Server) scheduler.Host {
		return scheduler.Host{Name: name, CPUs: 8, RAMMB: 16384, AllocVCPUs: 8, AllocRAMMB: 16384, Servers: servers}
	}
	mv := func(id, from, to string, ram int) scheduler.Action {
		return scheduler.Action{Kind: scheduler.LiveMigrate, Server: id, From: from, To: to, VCPUs: 1, RAMMB: ram, CPU: 0.5, RAM: float64(ram) / 2}
	}
	hosts := []scheduler.Host{hst("h1", srv("big", 4096), srv("small", 512)), hst("h2"), hst("h3")}
	c := New(Options{Seed: 1, NoAgents: true, Recheck: true, EventDriven: true,
		MigrationDuration: func(a scheduler.Action) time.Duration { return time.Duration(a.RAMMB/512) * time.Second }}, hosts)
	start := c.Now
	ended := map[string]time.Time{}
	run := func(id string, a scheduler.Action) {
		plan := scheduler.Plan{Steps: [][]scheduler.Action{{a}}, Snapshot: hosts}
		c.Execute(scheduler.ExecRequest{PartID: id, Version: 1, Event: scheduler.Event{ID: id}, Plan: plan},
			func(o scheduler.Outcome, class scheduler.EndClass, reason string) {
				if class != scheduler.EndExecuted {
					t.Errorf("%s ended %v/%s: %s", id, o, class, reason)
				}
				ended[id] = c.Now
			})
	}
	run("long", mv("big", "h1", "h2", 4096)) // 8 s
	c.Run(time.Second)
	run("short", mv("small", "h1", "h3", 512)) // 1 s
	if !c.RunUntil(20*time.Second, func() bool { return len(ended) == 2 }) {
		t.Fatalf("plans ended: %v", ended)
	}
	if got := ended["short"].Sub(start); got > 3*time.Second {
		t.Errorf("the short plan ended %v after the start, want about 2 s: it waited for the long one (ended %v)", got, ended["long"].Sub(start))
	}
	if len(c.Moves) != 2 || c.Moves[0].Server != "small" {
		t.Errorf("moves %+v, want small's first", c.Moves)
	}
	c.Check()
	if len(c.Violations) > 0 {
		t.Fatal(c.Violations)
	}
}
