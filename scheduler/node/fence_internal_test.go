package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// The source host's agent grants an action only to the leader of the
// partition it is in, for that partition, and nothing more once the
// partition ended here; what it granted is handed back once, at the end.
func TestLedgerGrants(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &scheduler.Partition{ID: "p1", Leader: "h2", Nodes: []string{"h1", "h2"}}
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2"}
	ask := func(part, leader string, a scheduler.Action) grantAsk {
		return grantAsk{Part: part, Leader: leader, Event: scheduler.Event{ID: "e1"}, Action: a}
	}
	var l ledger
	for _, tc := range []struct {
		name string
		p    *scheduler.Partition
		ask  grantAsk
		want string
	}{
		{"granted", p, ask("p1", "h2", a), ""},
		{"granted again (same id)", p, ask("p1", "h2", a), ""},
		{"another leader", p, ask("p1", "h3", a), "h1 follows leader h2, not h3"},
		{"another partition", p, ask("p0", "h2", a), "h1 is in partition p1, not p0"},
		{"no partition", nil, ask("p1", "h2", a), "h1 is in no partition"},
		{"not its host", p, ask("p1", "h2", scheduler.Action{Server: "s9", From: "h4", To: "h2"}), "action from h4 asked of h1"},
	} {
		got := l.grant("h1", tc.p, "g1", tc.ask, now)
		if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	gs := l.closeOut("p1", now)
	if len(gs) != 1 || gs[0].id != "g1" || gs[0].a.Server != "s1" {
		t.Fatalf("closed out %+v, want the one grant g1", gs)
	}
	if why := l.grant("h1", p, "g2", ask("p1", "h2", a), now); !strings.Contains(why, "gave up on partition p1") {
		t.Errorf("grant after the partition ended here: %q", why)
	}
	if gs := l.closeOut("p1", now); len(gs) != 0 {
		t.Errorf("grants handed back twice: %+v", gs)
	}
}

// A voter's key can make the arbiter commit anything (Raft tolerates
// crashes, not lies): say, a merge decision that puts h1 in the
// partition h2 leads, although h1 never joined it. That moves nothing
// off h1: h2's executor asks h1's agent for a grant over the bus, and h1
// grants only to the leader of the partition it joined itself. The
// control: once h1 joined that partition under h2, the grant is given.
func TestForgedMergeGetsNoGrant(t *testing.T) {
	run := demandPeers(t)
	h1 := run("h1", nil)
	h2 := run("h2", nil)
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Overload, Host: "h2"}
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2"}
	f := runnerFence{r: h2, part: "p-merged", leader: "h2"}
	if g, err := f.Grant(context.Background(), ev, a); !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "h1 is in no partition") {
		t.Fatalf("grant %+v, %v: want refused, h1 never joined the partition", g, err)
	}
	h1.mu.Lock()
	h1.state = &scheduler.Partition{ID: "p-merged", Leader: "h2", Nodes: []string{"h1", "h2"}}
	h1.mu.Unlock()
	if g, err := f.Grant(context.Background(), ev, a); err != nil || g.ID == "" {
		t.Fatalf("grant %+v, %v: want given once h1 joined under h2", g, err)
	}
}
