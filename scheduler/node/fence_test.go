package node_test

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/internal/cutproxy"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
)

// fenceFunc is a node.Fence from a function.
type fenceFunc func(ctx context.Context, ev scheduler.Event, a scheduler.Action) (node.Grant, error)

func (f fenceFunc) Grant(ctx context.Context, ev scheduler.Event, a scheduler.Action) (node.Grant, error) {
	return f(ctx, ev, a)
}

// A fenced action is sent only with its grant, within the grant's
// validity; refused or late, nothing reaches Nova and the action says why.
func TestExecutorFence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fence func(w *execWorld) node.Fence
		want  string
		sent  bool
	}{
		{name: "granted", sent: true, want: "done[none] grant g1",
			fence: func(*execWorld) node.Fence {
				return fenceFunc(func(context.Context, scheduler.Event, scheduler.Action) (node.Grant, error) {
					return node.Grant{ID: "g1"}, nil
				})
			}},
		{name: "refused", want: "skipped[fenced]: fenced: h1's agent did not grant the action: not granted: h1 follows leader x",
			fence: func(*execWorld) node.Fence {
				return fenceFunc(func(context.Context, scheduler.Event, scheduler.Action) (node.Grant, error) {
					return node.Grant{}, fmt.Errorf("%w: h1 follows leader x", node.ErrNotGranted)
				})
			}},
		{name: "granted past its validity", want: "skipped[fenced]: fenced: grant g2 came N after it was asked, past its validity of 5s grant g2",
			fence: func(w *execWorld) node.Fence {
				return fenceFunc(func(context.Context, scheduler.Event, scheduler.Action) (node.Grant, error) {
					asked := w.clock.Now()
					<-w.clock.After(6 * time.Second) // a bus that held the answer
					return node.Grant{ID: "g2", Asked: asked}, nil
				})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 2)
			w.server("s1", "h1", 1, nil)
			if err := w.cloud.SetServiceStatus(context.Background(), "h1", true, "dvms:maintenance fence"); err != nil {
				t.Fatal(err)
			}
			ex := w.executor(fastExec(), w.cloud, w.cloud, w.clock)
			res := ex.ExecuteFenced(context.Background(), scheduler.Event{ID: "e1", Kind: scheduler.Maintenance, Host: "h1"},
				scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}}}, tc.fence(w))
			a := res.Actions[0]
			got := fmt.Sprintf("%s[%s]", a.Outcome, a.Class)
			if a.Reason != "" {
				got += ": " + a.Reason
			}
			if a.Grant != "" {
				got += " grant " + a.Grant
			}
			got = regexp.MustCompile(`came [0-9.]+m?s after`).ReplaceAllString(got, "came N after")
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if sent := w.cloud.Stats().Started > 0; sent != tc.sent {
				t.Errorf("live migration sent to nova: %v, want %v", sent, tc.sent)
			}
		})
	}
}

// Once the source host's agent refused this plan a grant, the plan's
// later actions from that host are skipped at once: not re-checked (no
// Nova read), not asked for again.
func TestExecutorFenceRefusalEndsTheSource(t *testing.T) {
	w := newExecWorld(t, 2)
	w.server("s1", "h1", 1, nil)
	w.server("s2", "h1", 1, nil)
	if err := w.cloud.SetServiceStatus(context.Background(), "h1", true, "dvms:maintenance fence"); err != nil {
		t.Fatal(err)
	}
	asked := 0
	fence := fenceFunc(func(context.Context, scheduler.Event, scheduler.Action) (node.Grant, error) {
		asked++
		return node.Grant{}, fmt.Errorf("%w: h1 follows leader x", node.ErrNotGranted)
	})
	ex := w.executor(fastExec(), w.cloud, w.cloud, w.clock)
	res := ex.ExecuteFenced(context.Background(), scheduler.Event{ID: "e1", Kind: scheduler.Maintenance, Host: "h1"},
		scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}, {move("s2", "h1", "h2", 1)}}}, fence)
	if asked != 1 || res.Skipped != 2 || res.Actions[1].Class != node.ReasonFenced {
		t.Fatalf("asked %d time(s), %+v; want one ask and both skipped as fenced", asked, res)
	}
}

// sentNova records every live migration each agent hands Nova.
type sentNova struct {
	nova.Client
	host  string
	clock node.Clock
	log   *sentLog
}

type sent struct {
	agent, event, server, to string
	at                       time.Time
}

type sentLog struct {
	mu sync.Mutex
	l  []sent
}

func (s sentNova) LiveMigrate(ctx context.Context, id, dest string) (nova.Receipt, error) {
	rc, err := s.Client.LiveMigrate(ctx, id, dest)
	if err == nil {
		s.log.mu.Lock()
		s.log.l = append(s.log.l, sent{agent: s.host, event: nova.RequestID(ctx), server: id, to: dest, at: s.clock.Now()})
		s.log.mu.Unlock()
	}
	return rc, err
}

func (l *sentLog) all() []sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.l)
}

// stampedRecord is a record with the time the agent made it.
type stampedRecord struct {
	host string
	at   time.Time
	r    scheduler.Record
}

// A drain of 5 servers over a real NATS server whose executing leader's
// bus is cut mid-drain (each agent reaches NATS through a proxy of its
// own; the leader's is cut until the drained host's agent gave up on it,
// the partition timeout of a plan that runs: 14 s of the agents' clock). The leader hands Nova no new
// action once cut (bounded by the grant validity); the drained host's
// agent gives up on it, is held until the moves it granted ended in
// Nova, and records them with their true outcome; only then does a new
// plan act on the host: no two plans ever have migrations of the host
// in flight at once, and the joined journals record each migration once.
func TestFencedLeaderCutMidDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const scale = 10
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), scale)
	fc := fake.DefaultConfig()
	fc.BandwidthMBps = 50 // 2 GiB: 42 s a migration, one at a time per source
	cloud := fake.New(fc, clock)
	hosts := []string{"compute-1", "compute-2", "compute-3", "compute-4"}
	const src = "compute-1"
	for i, h := range hosts {
		cloud.AddHost(nova.Host{Name: h, VCPUs: 16, RAMMB: 65536, CPUAllocRatio: 4, RAMAllocRatio: 1})
		// 5 on src: 2 handed to Nova when the leader is cut (one
		// running, one queued: the executor holds no more per source),
		// 3 left for the plan after it. Each costs 42 s of the agents'
		// clock (4 s of wall), and a larger drain proves nothing more.
		n := 1
		if h == src {
			n = 5
		}
		for j := range n {
			id := fmt.Sprintf("s-%d-%d", i+1, j)
			if err := cloud.AddServer(nova.Server{ID: id, Name: id, Host: h, VCPUs: 2, RAMMB: 2048}); err != nil {
				t.Fatal(err)
			}
			if err := cloud.SetDemand(id, nova.Demand{CPU: 0.5, RAMMB: 1024}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nu, err := url.Parse(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	arb := consensus.NewLocal(clock.Now)
	rc := node.DefaultConfig()
	rc.Region = "fence"
	rc.Exec.Poll = 500 * time.Millisecond
	var (
		logs    testlog.Buffer
		log     sentLog
		mu      sync.Mutex
		recs    []stampedRecord
		adopted = map[string]node.ExecResult{}
		wg      sync.WaitGroup
	)
	proxies, runners, journals := map[string]*cutproxy.Proxy{}, map[string]*node.Runner{}, map[string]*journal.Journal{}
	for _, h := range hosts {
		p, err := cutproxy.New(nu.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[h] = p
		tr, err := bus.ConnectNATS(ctx, bus.Config{URL: "nats://" + p.Addr(), Name: h, ReconnectWait: 50 * time.Millisecond, MaxReconnects: -1})
		if err != nil {
			t.Fatal(err)
		}
		j := journal.New(h, clock.Now)
		journals[h] = j
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "fence"
		r, err := node.New(rc, ac, hosts, node.Deps{
			Bus: tr, Nova: sentNova{Client: cloud, host: h, clock: clock, log: &log}, Demand: cloud, Arbiter: arb, Clock: clock, Log: zerolog.New(&logs).Level(zerolog.InfoLevel),
			Hooks: node.Hooks{
				OnRecord: func(host string, r scheduler.Record) {
					j.Record(r)
					mu.Lock()
					recs = append(recs, stampedRecord{host, clock.Now(), r})
					mu.Unlock()
				},
				OnExec: func(_ string, ev scheduler.Event, res node.ExecResult) { j.Exec(ev, res) },
				OnAdopt: func(host string, ev scheduler.Event, res node.ExecResult) {
					j.Adopted(ev, res)
					mu.Lock()
					adopted[host+" "+ev.ID] = res
					mu.Unlock()
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runners[h] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer tr.Close()
			_ = r.Run(ctx)
		}()
	}
	defer wg.Wait()
	defer cancel()
	if err := cloud.SetServiceStatus(ctx, src, true, "dvms:maintenance fence test"); err != nil {
		t.Fatal(err)
	}

	// Mid-drain: as soon as two moves off src were handed to Nova (one
	// running, one queued behind it), their sender's bus is cut.
	var leader, lostEvent string
	if !waitFor(t, 60*time.Second, func() bool {
		if l := log.all(); len(l) > 1 {
			leader, lostEvent = l[0].agent, l[0].event
			return true
		}
		return false
	}) {
		t.Fatal("no two migrations off " + src + " within 60 s")
	}
	if leader == src {
		t.Fatalf("the drained host leads its own drain: nothing to cut")
	}
	proxies[leader].Cut()
	cutAt := clock.Now()
	t.Logf("cut %s's bus at %s", leader, cutAt.Format("15:04:05"))
	// The cut lasts until the drained host's agent gave up on the leader
	// (its partition timeout: 14 s of the agents' clock while a plan runs).
	gaveUp := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(recs, func(r stampedRecord) bool {
			return r.host == src && r.r.Kind == scheduler.RecDissolved && (r.r.Class == scheduler.EndTimeout || r.r.Class == scheduler.EndMemberLost)
		})
	}
	if !waitFor(t, 30*time.Second, gaveUp) {
		t.Fatalf("%s did not give up on its leader %s, cut for 30 s", src, leader)
	}
	proxies[leader].Heal()
	t.Logf("healed at %s", clock.Now().Format("15:04:05"))

	if !waitFor(t, 120*time.Second, func() bool {
		ss, err := cloud.Servers(ctx, src)
		return err == nil && len(ss) == 0
	}) {
		t.Fatalf("%s not drained", src)
	}

	// (a) The cut leader handed Nova nothing new once its grants could
	// no longer be asked for: a grant asked before the cut is good for
	// GrantValidity.
	bound := cutAt.Add(rc.Exec.GrantValidity)
	for _, s := range log.all() {
		if s.agent == leader && s.event == lostEvent && s.at.After(bound) {
			t.Errorf("cut leader %s sent %s to %s at +%s, past the grant validity", leader, s.server, s.to, s.at.Sub(cutAt))
		}
	}
	// At most one plan acting on src at any moment: no migration of one
	// plan (agent, event) starts while one of another plan is in flight.
	type span struct {
		plan     string
		from, to time.Time
		server   string
	}
	var spans []span
	for _, s := range log.all() {
		ms, err := cloud.Migrations(ctx, s.server)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Time{}
		for _, m := range ms {
			if m.Dest == s.to && !m.CreatedAt.Before(s.at.Add(-time.Second)) {
				end = m.UpdatedAt
				if !m.Terminal() {
					end = clock.Now()
				}
			}
		}
		spans = append(spans, span{plan: s.agent + "/" + s.event, from: s.at, to: end, server: s.server})
	}
	for _, a := range spans {
		for _, b := range spans {
			if a.plan != b.plan && b.from.After(a.from) && b.from.Before(a.to) {
				t.Errorf("plan %s started %s at +%s while %s of plan %s ran (until +%s)",
					b.plan, b.server, b.from.Sub(cutAt), a.server, a.plan, a.to.Sub(cutAt))
			}
		}
	}
	// The drained host's agent gave up on the leader, adopted what it had
	// granted, and raised no event while it was held.
	mu.Lock()
	var lost scheduler.Record
	var lostAt, raisedAgain time.Time
	for _, r := range recs {
		if r.host == src && r.r.Kind == scheduler.RecDissolved && lostAt.IsZero() &&
			(r.r.Class == scheduler.EndTimeout || r.r.Class == scheduler.EndMemberLost) {
			lost, lostAt = r.r, r.at
		}
		if r.host == src && r.r.Kind == scheduler.RecEventRaised && !lostAt.IsZero() && raisedAgain.IsZero() {
			raisedAgain = r.at
		}
	}
	nAdopted := len(adopted)
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "adopted the lost leader's moves") {
			t.Logf("ADOPTION (agents' clock): %s", l)
		}
	}
	for k, res := range adopted {
		t.Logf("adopted by %s: done %d, failed %d, never sent %d", k, res.Done, res.Failed, res.Skipped)
	}
	mu.Unlock()
	if lostAt.IsZero() || nAdopted == 0 {
		t.Fatalf("%s never gave up on its leader %s with moves granted (adopted %d)", src, leader, nAdopted)
	}
	t.Logf("%s gave up on %s at +%s (%s), raised again at +%s", src, leader, lostAt.Sub(cutAt), lost.Reason, raisedAgain.Sub(cutAt))
	for _, s := range spans {
		if s.plan == leader+"/"+lostEvent && !raisedAgain.IsZero() && s.to.After(raisedAgain) {
			t.Errorf("%s raised its event again at +%s while the lost plan's move of %s ran until +%s", src, raisedAgain.Sub(cutAt), s.server, s.to.Sub(cutAt))
		}
	}
	// (c) Each migration recorded once, with its true outcome, in the
	// joined journals (once the executors and the adoption reported).
	completed := map[string]int{} // server>dest -> completed in Nova
	for _, s := range log.all() {
		ms, _ := cloud.Migrations(ctx, s.server)
		for _, m := range ms {
			if m.Dest == s.to && m.Status == nova.MigrationCompleted && !m.CreatedAt.Before(s.at.Add(-time.Second)) {
				completed[s.server+">"+s.to]++
			}
		}
	}
	recorded := func() map[string]int { // server>dest -> records saying done
		var lists [][]journal.Entry
		for _, j := range journals {
			lists = append(lists, j.Snapshot())
		}
		done := map[string]int{}
		for _, e := range journal.Join(lists...) {
			for _, a := range e.Actions {
				if a.Outcome == "done" {
					done[a.Server+">"+a.To]++
				}
			}
		}
		return done
	}
	waitFor(t, 30*time.Second, func() bool { return len(recorded()) >= len(completed) })
	var lists [][]journal.Entry
	for _, j := range journals {
		lists = append(lists, j.Snapshot())
	}
	for _, e := range journal.Join(lists...) {
		for _, a := range e.Actions {
			if a.Grant != "" && a.Grant != "local" {
				t.Logf("event %s (%s): %s %s>%s %s [%s] adopted=%v %s", e.ID, e.Outcome, a.Grant, a.Server, a.To, a.Outcome, a.Class, a.Adopted, a.Reason)
			}
		}
	}
	done := recorded()
	for k, n := range completed {
		if done[k] != n {
			t.Errorf("migration %s: completed %d time(s) in Nova, recorded done %d time(s)", k, n, done[k])
		}
	}
	for k, n := range done {
		if completed[k] == 0 {
			t.Errorf("migration %s recorded done %d time(s), never completed in Nova", k, n)
		}
	}
	if v := cloud.Violations(); len(v) > 0 || cloud.ServersLost() != 0 {
		t.Fatalf("violations %v, lost %d", v, cloud.ServersLost())
	}
}
