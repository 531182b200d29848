package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// A lost leader's cold migration left waiting in VERIFY_RESIZE: the
// source's agent, adopting the leader's moves, confirms it (one request
// besides the server's read); one that finished confirmed is done.
func TestAdoptConfirmsColdMigration(t *testing.T) {
	ctx := context.Background()
	c, clock := manualCloud(t, testServer{"s1", "h1", 2, 0})
	if _, err := c.Migrate(ctx, "s1", "h2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	r := &Runner{d: Deps{Nova: c}}
	g := granted{id: "g1", ev: scheduler.Event{ID: "ev-1", Kind: scheduler.Maintenance, Host: "h1"}, at: clock.Now(),
		a: scheduler.Action{Kind: scheduler.ColdMigrate, Server: "s1", From: "h1", To: "h2", VCPUs: 2, RAMMB: 1024}}
	for _, want := range []string{"resize confirmed by its source's agent", ""} {
		res, n := r.outcome(ctx, g, map[string]nova.Server{}) // no longer listed on h1
		if res.Outcome != ActionDone || want != "" && (n != 2 || !strings.Contains(res.Reason, want)) {
			t.Fatalf("adopted cold migration: %s [%s] %q after %d requests, want done, %q", res.Outcome, res.Class, res.Reason, n, want)
		}
		clock.Advance(time.Minute) // the compute confirms it
		s, _ := c.Server(ctx, "s1")
		if s.Status != nova.StatusActive || s.Host != "h2" {
			t.Fatalf("s1 %s on %s, want ACTIVE on h2", s.Status, s.Host)
		}
	}
}
