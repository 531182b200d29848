package detsim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// The safety observer is code too: corrupt the ground truth behind its
// back and it must say so (a broken observer passes every run).
func TestObserverCatchesCorruptedGroundTruth(t *testing.T) {
	cloud := func() []scheduler.Host {
		return []scheduler.Host{
			host("h1", 8, server("a", 1), server("b", 1)),
			host("h2", 8, server("c", 1)),
			host("h3", 8),
		}
	}
	for _, tc := range []struct {
		name    string
		corrupt func(c *Cluster)
		want    string
	}{
		{name: "a server lost", corrupt: func(c *Cluster) {
			c.Hosts["h1"].Servers = c.Hosts["h1"].Servers[1:]
		}, want: "servers: 2, want 3"},
		{name: "a server on two hosts", corrupt: func(c *Cluster) {
			c.Hosts["h3"].Servers = append(c.Hosts["h3"].Servers, c.Hosts["h1"].Servers[0])
		}, want: "server a on h1 and h3"},
		{name: "a server duplicated on its host", corrupt: func(c *Cluster) {
			c.Hosts["h2"].Servers = append(c.Hosts["h2"].Servers, c.Hosts["h2"].Servers[0])
		}, want: "server c on h2 and h2"},
		{name: "a server vanished in flight", corrupt: func(c *Cluster) {
			c.Execute(scheduler.ExecRequest{Event: scheduler.Event{ID: "ev"}, Plan: scheduler.Plan{Steps: [][]scheduler.Action{{
				{Kind: scheduler.LiveMigrate, Server: "a", From: "h1", To: "h3", VCPUs: 2, RAMMB: 2048, CPU: 1, RAM: 1024}}}}},
				func(scheduler.Outcome, scheduler.EndClass, string) {})
			c.RunUntil(time.Minute, func() bool { return c.Started > 0 })
			h := c.Hosts["h1"]
			h.Servers = slices.DeleteFunc(h.Servers, func(s scheduler.Server) bool { return s.ID == "a" })
			c.RunUntil(time.Minute, c.Idle)
		}, want: "server vanished in flight: a (h1 to h3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Seed: 1, NoAgents: true, Recheck: true}, cloud())
			c.Run(time.Second)
			c.Check()
			if len(c.Violations) > 0 {
				t.Fatalf("violations before corruption: %v", c.Violations)
			}
			tc.corrupt(c)
			c.Check()
			if !slices.ContainsFunc(c.Violations, func(v string) bool { return strings.Contains(v, tc.want) }) {
				t.Errorf("violations %q, want one saying %q", c.Violations, tc.want)
			}
		})
	}
}
