package node_test

import (
	"context"
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

type memberEvents struct {
	mu       sync.Mutex
	up, down []string
}

func (e *memberEvents) has(list *[]string, host string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(*list, host)
}

// startMember runs the membership of host; set, if given, configures it
// before Run.
func startMember(t *testing.T, ctx context.Context, url, host, incarnation string, ev *memberEvents, set ...func(*node.Membership)) (*node.Membership, func()) {
	t.Helper()
	return startMemberDeadAfter(t, ctx, url, host, incarnation, 400*time.Millisecond, ev, set...)
}

// startMemberDeadAfter is startMember with its own DeadAfter: how long
// this member waits, silent peer by silent peer, before it calls one dead.
func startMemberDeadAfter(t *testing.T, ctx context.Context, url, host, incarnation string, deadAfter time.Duration, ev *memberEvents, set ...func(*node.Membership)) (*node.Membership, func()) {
	t.Helper()
	tr, err := bus.ConnectNATS(ctx, bus.Config{URL: url, Name: host})
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.MembershipConfig{Region: "mt", Interval: 50 * time.Millisecond, DeadAfter: deadAfter,
		Self: node.Heartbeat{Host: host, Site: "site-a", Incarnation: incarnation, Raft: "127.0.0.1:1"}}
	m, err := node.NewMembership(cfg, tr, node.Wall{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ev != nil {
		m.OnUp = func(h string) { ev.mu.Lock(); ev.up = append(ev.up, h); ev.mu.Unlock() }
		m.OnDown = func(h string) { ev.mu.Lock(); ev.down = append(ev.down, h); ev.mu.Unlock() }
	}
	for _, f := range set {
		f(m)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(mctx); _ = tr.Close() }()
	return m, func() { cancel(); <-done }
}

// Heartbeats over a real NATS server: members come up, a stopping member
// leaves at once, a silent one is declared dead after DeadAfter, and a
// restart (new incarnation) is seen as down then up.
func TestMembership(t *testing.T) {
	natsURL := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &memberEvents{}
	// The watcher calls a silent member dead only after a minute: every
	// departure it reports within the test's waits (20 s at most) was
	// said, never inferred, however late a loaded machine runs the
	// heartbeats; and no member flaps down and up meanwhile.
	const watcherDeadAfter = time.Minute
	watcher, stopW := startMemberDeadAfter(t, ctx, natsURL, "h0", "i0", watcherDeadAfter, ev)
	defer stopW()
	_, stop1 := startMember(t, ctx, natsURL, "h1", "i1", nil)
	_, stop2 := startMember(t, ctx, natsURL, "h2", "i2", nil)
	if !waitFor(t, 20*time.Second, func() bool { return len(watcher.Members()) == 3 }) {
		t.Fatalf("members %v, want h0 h1 h2", watcher.Members())
	}
	if ms := watcher.Members(); ms[1].Raft != "127.0.0.1:1" || ms[1].Site != "site-a" {
		t.Fatalf("heartbeat fields not carried: %+v", ms[1])
	}

	// A graceful stop says goodbye: gone well before the watcher's
	// DeadAfter (the wait is a third of it).
	if ev.has(&ev.down, "h1") {
		t.Fatal("h1 reported down while it ran")
	}
	stop1()
	if !waitFor(t, watcherDeadAfter/3, func() bool { return ev.has(&ev.down, "h1") }) {
		t.Fatalf("h1 left but was not reported down within %s: no goodbye heard", watcherDeadAfter/3)
	}

	// h2 restarts with a new incarnation: down then up again.
	stop2()
	_, stop2b := startMember(t, ctx, natsURL, "h2", "i2b", nil)
	defer stop2b()
	if !waitFor(t, watcherDeadAfter/3, func() bool {
		ms := watcher.Members()
		return ev.has(&ev.down, "h2") && len(ms) == 2 && ms[1].Incarnation == "i2b"
	}) {
		t.Fatalf("restart of h2 not followed: members %v", watcher.Members())
	}
}

// A member that goes silent without saying goodbye (crash, cut link) is
// declared dead after DeadAfter.
func TestMembershipSilenceIsDeath(t *testing.T) {
	natsURL := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := &memberEvents{}
	watcher, stopW := startMember(t, ctx, natsURL, "h0", "i0", ev)
	defer stopW()
	// h1 publishes by hand, once: then silence.
	tr, err := bus.ConnectNATS(ctx, bus.Config{URL: natsURL})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if !waitFor(t, 20*time.Second, func() bool {
		_ = tr.Publish(ctx, bus.HeartbeatSubject("mt"), []byte(`{"v":1,"host":"h1","incarnation":"x","seq":1}`))
		return ev.has(&ev.up, "h1")
	}) {
		t.Fatal("h1 never came up")
	}
	_ = tr.Publish(ctx, bus.HeartbeatSubject("mt"), []byte(`{"malformed`))
	if !waitFor(t, 20*time.Second, func() bool { return ev.has(&ev.down, "h1") }) {
		t.Fatal("a silent member was never declared dead")
	}
	if len(watcher.Members()) != 1 {
		t.Fatalf("members %v, want only h0", watcher.Members())
	}
}

// The coordinate travels with membership: a member's heartbeats carry
// it into the others' tables, and it is forgotten when the member leaves.
func TestMembershipCarriesCoordinates(t *testing.T) {
	natsURL := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table := node.NewCoordTable()
	mine := coordinate.NewCoordinate(coordinate.DefaultConfig())
	mine.Vec[0], mine.Error = 0.02, 0.1
	_, stopW := startMember(t, ctx, natsURL, "h0", "i0", nil, func(m *node.Membership) { m.Coords = table })
	defer stopW()
	_, stop1 := startMember(t, ctx, natsURL, "h1", "i1", nil, func(m *node.Membership) {
		m.SelfCoord = func() *coordinate.Coordinate { return mine }
	})
	if !waitFor(t, 20*time.Second, func() bool { c, ok := table.Get("h1"); return ok && c.Vec[0] == 0.02 }) {
		t.Fatal("h1's coordinate never reached h0's table")
	}
	stop1()
	if !waitFor(t, 20*time.Second, func() bool { _, ok := table.Get("h1"); return !ok }) {
		t.Fatal("h1 left but its coordinate stayed")
	}
}
