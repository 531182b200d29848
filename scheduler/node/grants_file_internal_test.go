package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
)

// quietBus delivers nothing: a lone agent.
type quietBus struct{}

type quietSub struct{}

func (quietSub) Unsubscribe() error                                      { return nil }
func (quietBus) Publish(context.Context, string, []byte) error           { return nil }
func (quietBus) Subscribe(string, bus.Handler) (bus.Subscription, error) { return quietSub{}, nil }
func (quietBus) Close() error                                            { return nil }

// The ledger's grants are on disk before a grant is answered, and stay
// there until forgotten (adopted, or their leader ended them); a ledger
// that cannot write its file gives no grant.
func TestLedgerKeepsGrantsOnDisk(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	p := &scheduler.Partition{ID: "p1", Leader: "h2", Nodes: []string{"h1", "h2"}}
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2"}
	ask := grantAsk{Part: "p1", Leader: "h2", Event: scheduler.Event{ID: "e1", Host: "h1"}, Action: a}
	l := ledger{host: "h1", file: GrantsFile(dir, "h1")}
	if why := l.grant("h1", p, "g1", ask, now); why != "" {
		t.Fatalf("refused: %s", why)
	}
	reread := func() grantList {
		t.Helper()
		l2 := ledger{host: "h1", file: GrantsFile(dir, "h1")}
		gs, err := l2.restore(now)
		if err != nil {
			t.Fatal(err)
		}
		if why := l2.grant("h1", p, "g9", ask, now); !strings.Contains(why, "gave up on partition p1") && len(gs) > 0 {
			t.Errorf("a restarted agent granted more for a partition of before its restart: %q", why)
		}
		return gs
	}
	if gs := reread(); len(gs) != 1 || gs[0].id != "g1" || gs[0].part != "p1" || gs[0].a != a || gs[0].ev.ID != "e1" || !gs[0].at.Equal(now) {
		t.Fatalf("read back %+v, want grant g1 of p1", gs)
	}
	if gs := l.closeOut("p1", now); len(gs) != 1 {
		t.Fatalf("closed out %+v", gs)
	}
	if gs := reread(); len(gs) != 1 {
		t.Fatalf("a grant being adopted is off disk: read back %+v", gs)
	}
	if err := l.forget([]string{"p1"}); err != nil {
		t.Fatal(err)
	}
	if gs := reread(); len(gs) != 0 {
		t.Fatalf("forgotten grants still on disk: %+v", gs)
	}

	bad := ledger{host: "h1", file: filepath.Join(dir, "missing", "grants-h1.json")}
	if why := bad.grant("h1", p, "g1", ask, now); !strings.Contains(why, "could not keep the grant") {
		t.Fatalf("a grant not kept on disk was given: %q", why)
	}
	if gs := bad.closeOut("p1", now); len(gs) != 0 {
		t.Fatalf("a grant refused is in the ledger: %+v", gs)
	}

	if err := os.WriteFile(GrantsFile(dir, "h1"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&ledger{host: "h1", file: GrantsFile(dir, "h1")}).restore(now); err == nil || !strings.Contains(err.Error(), "remove it once Nova shows no migration off h1 running") {
		t.Fatalf("a damaged file: %v", err)
	}
}

// An agent restarted while a move it granted still runs in Nova (its
// leader lost too) waits for that move before its host takes part in
// another plan: it raises its event only once Nova shows the migration
// ended, and records the move as it ended, under its grant.
func TestRestartedAgentWaitsForTheMovesItGranted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	fc := fake.DefaultConfig()
	fc.BandwidthMBps = 100 // 4 GiB: about 40 s of the agents' clock
	cloud := fake.New(fc, clock)
	for _, h := range []string{"h1", "h2"} {
		cloud.AddHost(nova.Host{Name: h, VCPUs: 16, RAMMB: 65536, CPUAllocRatio: 4, RAMAllocRatio: 1})
	}
	for _, id := range []string{"s1", "s2"} {
		if err := cloud.AddServer(nova.Server{ID: id, Name: id, Host: "h1", VCPUs: 2, RAMMB: 4096}); err != nil {
			t.Fatal(err)
		}
		if err := cloud.SetDemand(id, nova.Demand{CPU: 0.5, RAMMB: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance restart test"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rc := DefaultConfig()
	rc.StateDir = dir
	newRunner := func(hooks Hooks) *Runner {
		ac := scheduler.DefaultConfig("h1")
		ac.Incarnation = "t"
		r, err := New(rc, ac, []string{"h1", "h2"}, Deps{Bus: quietBus{}, Nova: cloud, Demand: cloud, Arbiter: consensus.NewLocal(clock.Now),
			Clock: clock, Log: zerolog.Nop(), Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// The first incarnation grants leader h2 the move of s1; h2 hands
	// it to Nova; then both are lost.
	first := newRunner(Hooks{})
	ev := scheduler.Event{ID: "e-old", Kind: scheduler.Maintenance, Host: "h1"}
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2"}
	p := &scheduler.Partition{ID: "p-old", Leader: "h2", Nodes: []string{"h1", "h2"}}
	if why := first.fence.grant("h1", p, "g-old", grantAsk{Part: "p-old", Leader: "h2", Event: ev, Action: a}, clock.Now()); why != "" {
		t.Fatalf("refused: %s", why)
	}
	if _, err := cloud.LiveMigrate(ctx, "s1", "h2"); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		raised  time.Time
		adopted []ActionResult
	)
	second := newRunner(Hooks{
		OnRecord: func(_ string, r scheduler.Record) {
			mu.Lock()
			defer mu.Unlock()
			if r.Kind == scheduler.RecEventRaised && raised.IsZero() {
				raised = clock.Now()
			}
		},
		OnAdopt: func(_ string, _ scheduler.Event, res ExecResult) {
			mu.Lock()
			defer mu.Unlock()
			adopted = append(adopted, res.Actions...)
		},
	})
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		ok := !raised.IsZero()
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted agent never raised its event")
		}
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	ms, err := cloud.Migrations(ctx, "s1")
	if err != nil || len(ms) != 1 {
		t.Fatalf("migrations of s1: %+v, %v", ms, err)
	}
	m := ms[0]
	mu.Lock()
	defer mu.Unlock()
	if !m.Terminal() || raised.Before(m.UpdatedAt) {
		t.Fatalf("the restarted agent raised its event at %s while the move it granted before the restart ran (migration %s, ended %v at %s)",
			raised.Format("15:04:05"), m.Status, m.Terminal(), m.UpdatedAt.Format("15:04:05"))
	}
	if len(adopted) != 1 || adopted[0].Grant != "g-old" || adopted[0].Outcome != ActionDone {
		t.Fatalf("adopted %+v, want the move of s1 done under grant g-old", adopted)
	}
	if gs, err := (&ledger{host: "h1", file: GrantsFile(dir, "h1")}).restore(clock.Now()); err != nil || len(gs) != 0 {
		t.Fatalf("grants left on disk after the adoption: %+v, %v", gs, err)
	}
	t.Logf("migration ended at +%s, event raised at +%s", m.UpdatedAt.Sub(m.CreatedAt), raised.Sub(m.CreatedAt))
}
