package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Red team (issue 10): the attacks of the issue replayed against four
// signed agents on the embedded NATS server and nova/fake. Two attackers:
// "outsider", a plain NATS connection without a key, and "insider", who
// stole compute-4's key (a compromised host) and signs as compute-4. Each
// attack must move no server and crash nothing; afterwards the legitimate
// agents still solve a real overload.

const rtRegion = "rt"

type redTeam struct {
	t        *testing.T
	cloud    *fake.Cloud
	clock    *node.Scaled
	hosts    []string
	keys     string
	outside  bus.Transport // no key
	inside   bus.Transport // compute-4's key
	members  map[string]*node.Membership
	wraps    map[string]*auth.Transport
	sent     map[string]*atomic.Int64 // protocol messages sent, by agent
	nacks    sync.Map                 // partition id -> *atomic.Int64: nacks sent about it
	stopped  atomic.Int64             // runners whose Run returned
	changes  atomic.Int64             // membership changes (up or down) after start
	mu       sync.Mutex
	execs    []node.ExecResult
	natsErrs []string // asynchronous NATS errors (permission violations), by connection
	runners  map[string]*node.Runner
	wg       sync.WaitGroup
	logs     testlog.Buffer // the agents' logs, for a failure's story
	arb      *watchedArbiter
}

// watchedArbiter is the agents' arbiter, noting every partition a call
// changed (registered, merged, dissolved).
type watchedArbiter struct {
	consensus.Arbiter
	mu      sync.Mutex
	changed map[string]int
}

func (w *watchedArbiter) note(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.changed[id]++
	}
}

func (w *watchedArbiter) Register(ctx context.Context, r consensus.Registration) (consensus.Decision, error) {
	d, err := w.Arbiter.Register(ctx, r)
	if err == nil && d.Committed {
		w.note(r.ID)
	}
	return d, err
}

func (w *watchedArbiter) Merge(ctx context.Context, p, q consensus.Ref) (consensus.Decision, error) {
	d, err := w.Arbiter.Merge(ctx, p, q)
	if err == nil && d.Committed {
		w.note(p.ID, q.ID)
	}
	return d, err
}

func (w *watchedArbiter) Dissolve(ctx context.Context, r consensus.Ref) (consensus.Decision, error) {
	d, err := w.Arbiter.Dissolve(ctx, r)
	if err == nil && d.Committed {
		w.note(r.ID)
	}
	return d, err
}

// arbiterUntouched checks that no call changed the arbiter's record of
// the forged partitions ids.
func (rt *redTeam) arbiterUntouched(ids ...string) {
	rt.t.Helper()
	rt.arb.mu.Lock()
	defer rt.arb.mu.Unlock()
	for _, id := range ids {
		if n := rt.arb.changed[id]; n != 0 {
			rt.t.Errorf("the arbiter's record of forged partition %s changed %d times", id, n)
		}
	}
}

// startRedTeam starts four signed agents. With perms, the NATS server
// admits only the agents' keys, each with bus.AgentPermissions (there is
// no outsider then, and the insider connects with compute-4's key);
// every connection's asynchronous errors go to rt.natsErrs.
func startRedTeam(t *testing.T, ctx context.Context, perms ...bool) *redTeam {
	t.Helper()
	return startRedTeamWith(t, ctx, len(perms) > 0 && perms[0], nil, nil, 10)
}

// startRedTeamWith is startRedTeam with the runtime's and the agents'
// configurations tuned by tune and tuneAgent (nil: the defaults), the
// agents' clock at scale x the wall's.
func startRedTeamWith(t *testing.T, ctx context.Context, withPerms bool, tune func(*node.Config), tuneAgent func(*scheduler.Config), scale float64) *redTeam {
	t.Helper()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), scale)
	rt := &redTeam{t: t, clock: clock, cloud: fake.New(fake.DefaultConfig(), clock), keys: t.TempDir(),
		members: map[string]*node.Membership{}, runners: map[string]*node.Runner{}, wraps: map[string]*auth.Transport{}, sent: map[string]*atomic.Int64{}}
	for i := 1; i <= 4; i++ {
		h := fmt.Sprintf("compute-%d", i)
		rt.hosts = append(rt.hosts, h)
		rt.cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 32768, CPUAllocRatio: 4, RAMAllocRatio: 1})
		for j := range 2 {
			id := fmt.Sprintf("s-%d-%d", i, j)
			if err := rt.cloud.AddServer(nova.Server{ID: id, Name: id, Host: h, VCPUs: 2, RAMMB: 2048}); err != nil {
				t.Fatal(err)
			}
			_ = rt.cloud.SetDemand(id, nova.Demand{CPU: 1, RAMMB: 1024})
		}
	}
	keys := testbus.NewKeys(t, rt.keys, rt.hosts...)
	ec := bus.EmbeddedConfig{Port: -1}
	if withPerms {
		for _, h := range rt.hosts {
			s, err := auth.LoadSigner(rt.keys, h)
			if err != nil {
				t.Fatal(err)
			}
			ec.Users = append(ec.Users, bus.User{Name: h, Nkey: s.PublicKey(), Perms: bus.AgentPermissions(rtRegion, h)})
		}
	}
	ns, err := bus.StartEmbedded(ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	connect := func(name string) *bus.NATS {
		seed := ""
		if withPerms {
			seed = filepath.Join(rt.keys, strings.TrimPrefix(name, "insider:")+auth.SeedExt)
		}
		tr, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: name, ReconnectWait: 50 * time.Millisecond, MaxReconnects: -1,
			NkeySeedFile: seed, OnStateChange: func(ev string, err error) {
				if ev == "error" && err != nil {
					rt.mu.Lock()
					rt.natsErrs = append(rt.natsErrs, name+": "+err.Error())
					rt.mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	wrap := keys.Wrap
	if !withPerms {
		rt.outside = connect("outsider")
	}
	rt.inside = wrap(connect("insider:compute-4"), "compute-4")

	rt.arb = &watchedArbiter{Arbiter: consensus.NewLocal(clock.Now), changed: map[string]int{}}
	arb := rt.arb
	rc := node.DefaultConfig()
	rc.Region = rtRegion
	rc.Exec.Poll = 200 * time.Millisecond
	if tune != nil {
		tune(&rc)
	}
	for _, h := range rt.hosts {
		w := wrap(connect(h), h)
		rt.wraps[h] = w
		rt.sent[h] = &atomic.Int64{}
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "rt"
		if tuneAgent != nil {
			tuneAgent(&ac)
		}
		var demand nova.DemandSource = rt.cloud
		if withPerms {
			// Each agent measures its own host only, as on libvirt: the
			// executor asks the destination's agent over NATS.
			demand = node.OnlyHost(rt.cloud, h)
		}
		r, err := node.New(rc, ac, rt.hosts, node.Deps{
			Bus: w, Nova: rt.cloud, Demand: demand, Arbiter: arb, Clock: clock, Log: zerolog.New(&rt.logs).Level(zerolog.InfoLevel).With().Str("agent", h).Logger(),
			Hooks: node.Hooks{
				OnSend: func(_ string, m scheduler.Message) {
					rt.sent[h].Add(1)
					if m.Type == scheduler.MsgNack {
						n, _ := rt.nacks.LoadOrStore(m.PartID, &atomic.Int64{})
						n.(*atomic.Int64).Add(1)
					}
				},
				OnExec: func(_ string, _ scheduler.Event, res node.ExecResult) {
					rt.mu.Lock()
					rt.execs = append(rt.execs, res)
					rt.mu.Unlock()
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		mc := node.DefaultMembershipConfig()
		mc.Region, mc.Self = rtRegion, node.Heartbeat{Host: h, Incarnation: "rt"}
		m, err := node.NewMembership(mc, w, clock, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		m.OnDown = func(x string) { rt.changes.Add(1); r.MemberDown(x) }
		m.OnUp = func(x string) { rt.changes.Add(1); r.MemberUp(x) }
		rt.members[h] = m
		rt.runners[h] = r
		rt.wg.Add(2)
		go func() {
			defer rt.wg.Done()
			_ = r.Run(ctx)
			if ctx.Err() == nil {
				rt.stopped.Add(1)
			}
		}()
		go func() { defer rt.wg.Done(); _ = m.Run(ctx) }()
	}
	// Everyone hears everyone before the attacks.
	if !waitFor(t, 10*time.Second, func() bool {
		for _, m := range rt.members {
			if len(m.Members()) != 4 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("membership did not converge")
	}
	return rt
}

func (rt *redTeam) publish(tr bus.Transport, subject string, data []byte) {
	rt.t.Helper()
	if err := tr.Publish(context.Background(), subject, data); err != nil {
		rt.t.Fatal(err)
	}
}

func (rt *redTeam) send(tr bus.Transport, to string, m scheduler.Message) {
	rt.t.Helper()
	data, err := scheduler.Encode(m)
	if err != nil {
		rt.t.Fatal(err)
	}
	rt.publish(tr, bus.AgentSubject(rtRegion, to), data)
}

// placement is where every server is, and its status.
func (rt *redTeam) placement() map[string]string {
	out := map[string]string{}
	for _, h := range rt.hosts {
		ss, err := rt.cloud.Servers(context.Background(), h)
		if err != nil {
			rt.t.Fatal(err)
		}
		for _, s := range ss {
			out[s.ID] = h + "/" + s.Status
		}
	}
	return out
}

func (rt *redTeam) dropped(reason string) int64 {
	var n int64
	for _, w := range rt.wraps {
		n += w.Dropped()[reason]
	}
	return n
}

// untouched checks that no server moved and no agent stopped.
func (rt *redTeam) untouched(before map[string]string) {
	rt.t.Helper()
	after := rt.placement()
	for id, at := range before {
		if after[id] != at {
			rt.t.Errorf("server %s: %s -> %s", id, at, after[id])
		}
	}
	if st := rt.cloud.Stats(); st.Started != 0 {
		rt.t.Errorf("%d live migrations started", st.Started)
	}
	if n := rt.stopped.Load(); n != 0 {
		rt.t.Errorf("%d agents stopped", n)
	}
}

func maintenancePart(id, initiator string, nodes ...string) *scheduler.Partition {
	return &scheduler.Partition{ID: id, Version: 1, Initiator: initiator, Leader: initiator, Nodes: nodes, State: scheduler.Growing,
		Events: []scheduler.Event{{ID: "ev-" + id, Kind: scheduler.Maintenance, Host: initiator}}}
}

func TestRedTeam(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rt := startRedTeam(t, ctx)
	defer rt.wg.Wait()
	defer cancel()
	before := rt.placement()
	// Idle agents publish nothing but heartbeats: whatever runs the attack
	// provokes is counted from here.
	settle := func() { time.Sleep(1500 * time.Millisecond) } // 15 s of agent time: several partition timeouts

	t.Run("forged migration, no key", func(t *testing.T) {
		// The attack: Grow + Update to compute-1, a Grow to
		// compute-2 whose MAINTENANCE event names compute-1, answered with
		// compute-1's snapshot marked Draining.
		p := maintenancePart("p-forged", "compute-1", "compute-1")
		rt.send(rt.outside, "compute-1", scheduler.Message{Type: scheduler.MsgGrow, From: "compute-1", PartID: p.ID, Version: 1, Part: p})
		rt.send(rt.outside, "compute-1", scheduler.Message{Type: scheduler.MsgUpdate, From: "compute-1", PartID: p.ID, Version: 1, Part: p})
		rt.send(rt.outside, "compute-2", scheduler.Message{Type: scheduler.MsgGrow, From: "compute-1", PartID: p.ID, Version: 1, Part: p})
		rt.send(rt.outside, "compute-2", scheduler.Message{Type: scheduler.MsgSnapshot, From: "compute-1", PartID: p.ID, Version: 2,
			Host: &scheduler.Host{Name: "compute-1", Draining: true, CPUs: 8, RAMMB: 32768}})
		settle()
		if rt.dropped(auth.DropMalformed) < 4 {
			t.Fatalf("unsigned messages dropped: %d, want >= 4", rt.dropped(auth.DropMalformed))
		}
		rt.untouched(before)
		rt.arbiterUntouched(p.ID)
	})

	t.Run("forged migration, stolen key", func(t *testing.T) {
		// Signed as compute-4, but naming compute-1 as sender: refused.
		rt.send(rt.inside, "compute-2", scheduler.Message{Type: scheduler.MsgSnapshot, From: "compute-1", PartID: "p-x", Version: 2,
			Host: &scheduler.Host{Name: "compute-1", Draining: true}})
		// Naming itself, with compute-1's snapshot: malformed.
		rt.send(rt.inside, "compute-2", scheduler.Message{Type: scheduler.MsgSnapshot, From: "compute-4", PartID: "p-x", Version: 2,
			Host: &scheduler.Host{Name: "compute-1", Draining: true}})
		// A well-formed request for compute-1's maintenance, sent to
		// compute-1 itself: it joins (it is free), finds no room alone and
		// forwards to compute-2, which joins and plans the drain of
		// compute-1 from the event; the executor asks Nova, which says
		// compute-1 is enabled.
		rt.mu.Lock()
		rt.execs = nil
		rt.mu.Unlock()
		p := maintenancePart("p-insider", "compute-1", "compute-1")
		rt.send(rt.inside, "compute-1", scheduler.Message{Type: scheduler.MsgGrow, From: "compute-4", PartID: p.ID, Version: 1, Part: p})
		if !waitFor(t, 10*time.Second, func() bool {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return len(rt.execs) > 0
		}) {
			t.Fatal("the forged maintenance was never planned: the test no longer reaches the executor")
		}
		rt.mu.Lock()
		res := rt.execs[0]
		rt.mu.Unlock()
		t.Logf("executor on the forged maintenance: %+v", res)
		if res.Done != 0 || res.Skipped == 0 || res.Actions[0].Class != node.ReasonEvent {
			t.Fatalf("executor: %+v, want every action skipped for its reason", res)
		}
		rt.untouched(before)
	})

	t.Run("stolen key speaking for another host", func(t *testing.T) {
		// A partition heartbeat for a partition compute-2 is not in makes
		// it answer its sender with a nack: signed as compute-4 but naming
		// compute-1, it must be dropped before the agent sees it.
		count := func(from string) int64 {
			part := "p-nowhere-" + from
			rt.send(rt.inside, "compute-2", scheduler.Message{Type: scheduler.MsgHeartbeat, From: from, PartID: part, Version: 1})
			time.Sleep(300 * time.Millisecond)
			if n, ok := rt.nacks.Load(part); ok {
				return n.(*atomic.Int64).Load()
			}
			return 0
		}
		if n := count("compute-1"); n != 0 {
			t.Errorf("compute-2 answered %d messages to a heartbeat compute-4 signed as compute-1", n)
		}
		if n := count("compute-4"); n != 1 {
			t.Errorf("compute-2 answered %d messages to compute-4's own heartbeat, want its nack (control)", n)
		}
		rt.untouched(before)
		rt.arbiterUntouched("p-nowhere-compute-1", "p-nowhere-compute-4")
	})

	t.Run("forged leaving heartbeat", func(t *testing.T) {
		changes := rt.changes.Load()
		for _, tr := range []bus.Transport{rt.outside, rt.inside} {
			hb, _ := json.Marshal(node.Heartbeat{V: 1, Host: "compute-1", Incarnation: "rt", Seq: 1 << 40, Leaving: true})
			rt.publish(tr, bus.HeartbeatSubject(rtRegion), hb)
			ghost, _ := json.Marshal(node.Heartbeat{V: 1, Host: "ghost", Incarnation: "x", Raft: "203.0.113.7:7420"})
			rt.publish(tr, bus.HeartbeatSubject(rtRegion), ghost)
		}
		settle()
		for h, m := range rt.members {
			var names []string
			for _, mb := range m.Members() {
				names = append(names, mb.Host)
			}
			if strings.Join(names, ",") != strings.Join(rt.hosts, ",") {
				t.Errorf("%s's members: %v, want %v", h, names, rt.hosts)
			}
		}
		if n := rt.changes.Load() - changes; n != 0 {
			t.Errorf("%d membership changes (members declared gone or ghosts up)", n)
		}
		rt.untouched(before)
	})

	t.Run("partition without events", func(t *testing.T) {
		p := maintenancePart("p-empty", "compute-4", "compute-4")
		p.Events = nil
		for _, tr := range []bus.Transport{rt.outside, rt.inside} {
			for _, h := range rt.hosts[:3] {
				rt.send(tr, h, scheduler.Message{Type: scheduler.MsgGrow, From: "compute-4", PartID: p.ID, Version: 1, Part: p})
			}
		}
		settle()
		rt.untouched(before) // a panic would have killed the test binary
		rt.arbiterUntouched(p.ID)
	})

	t.Run("amplification", func(t *testing.T) {
		nodes := []string{"compute-4"}
		for i := range 399 {
			nodes = append(nodes, fmt.Sprintf("ghost-%03d", i))
		}
		p := maintenancePart("p-amp", "compute-4", nodes...)
		p.Events[0].Kind = scheduler.Overload
		sentBefore := rt.sent["compute-3"].Load()
		rt.send(rt.inside, "compute-3", scheduler.Message{Type: scheduler.MsgGrow, From: "compute-4", PartID: p.ID, Version: 1, Part: p})
		settle()
		if n := rt.sent["compute-3"].Load() - sentBefore; n > 0 {
			t.Errorf("victim sent %d protocol messages, want 0", n)
		}
		rt.untouched(before)
		rt.arbiterUntouched(p.ID)
	})

	t.Run("legitimate agents still work, under a frozen-region attack", func(t *testing.T) {
		// The frozen region: a Grow, an Update at version 1000 with
		// leader "evil", then a leader's heartbeat every 500 ms (agent
		// time) to every agent, kept up while compute-1 really overloads.
		// Unsigned, every one is dropped: no agent is bound, the event is
		// raised and solved as without the attack.
		p := maintenancePart("p-frozen", "evil", "evil")
		p.Events[0].Kind = scheduler.Overload
		frozen := *p
		frozen.Version, frozen.Leader, frozen.Nodes = 1000, "evil", append([]string{"evil"}, rt.hosts...)
		droppedBefore := rt.dropped(auth.DropMalformed)
		var forged atomic.Int64
		stop := make(chan struct{})
		var attacker sync.WaitGroup
		attacker.Go(func() {
			for _, h := range rt.hosts {
				rt.send(rt.outside, h, scheduler.Message{Type: scheduler.MsgGrow, From: "evil", PartID: p.ID, Version: 1, Part: p})
				rt.send(rt.outside, h, scheduler.Message{Type: scheduler.MsgUpdate, From: "evil", PartID: p.ID, Version: 1000, Part: &frozen})
				forged.Add(2)
			}
			tick := time.NewTicker(50 * time.Millisecond) // 500 ms of agent time
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for _, h := range rt.hosts {
					rt.send(rt.outside, h, scheduler.Message{Type: scheduler.MsgHeartbeat, From: "evil", PartID: p.ID, Version: 1000})
					forged.Add(1)
				}
			}
		})
		for j := range 2 {
			_ = rt.cloud.SetDemand(fmt.Sprintf("s-1-%d", j), nova.Demand{CPU: 5, RAMMB: 1024}) // 10 > 8 cores
		}
		// No agent is ever in the forged partition: the real event is
		// held by it for no time at all.
		var heldBy []string
		solved := waitFor(t, 30*time.Second, func() bool {
			for _, h := range rt.hosts {
				if p := rt.runners[h].Partition(); p != nil && p.ID == "p-frozen" {
					heldBy = append(heldBy, h)
				}
			}
			return !rt.cloud.Overloaded("compute-1")
		})
		close(stop)
		if len(heldBy) > 0 {
			t.Errorf("agents seen in the forged partition: %v", heldBy)
		}
		rt.arbiterUntouched(p.ID)
		attacker.Wait()
		if !solved {
			t.Fatalf("a real overload was not solved under the frozen-region attack (migrations: %+v)", rt.cloud.Stats())
		}
		if !waitFor(t, 20*time.Second, func() bool { return rt.dropped(auth.DropMalformed)-droppedBefore >= forged.Load() }) {
			t.Errorf("forged messages dropped: %d of %d", rt.dropped(auth.DropMalformed)-droppedBefore, forged.Load())
		}
		if v := rt.cloud.Violations(); len(v) > 0 || rt.cloud.ServersLost() != 0 {
			t.Fatalf("violations %v, lost %d", v, rt.cloud.ServersLost())
		}
	})
}

// Issue 10: NATS itself admits only the region's keys, each agent with
// bus.AgentPermissions. Four agents work under those permissions — heard
// each other, publish their summaries, and solve a real overload
// (protocol messages, the executor's demand queries and their answers)
// — without one permission violation; a connection without a key is
// refused.
func TestAgentsWorkUnderNATSPermissions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rt := startRedTeam(t, ctx, true)
	defer rt.wg.Wait()
	defer cancel()
	for _, r := range rt.runners {
		rt.wg.Go(func() { _ = r.PublishSummaries(ctx, node.SummaryConfig{Interval: 100 * time.Millisecond, Change: 0.1}) })
	}
	for j := range 2 {
		_ = rt.cloud.SetDemand(fmt.Sprintf("s-1-%d", j), nova.Demand{CPU: 5, RAMMB: 1024}) // 10 > 8 cores
	}
	if !waitFor(t, 30*time.Second, func() bool { return !rt.cloud.Overloaded("compute-1") }) {
		t.Fatalf("the overload was not solved under NATS permissions (migrations: %+v)", rt.cloud.Stats())
	}
	if st := rt.cloud.Stats(); st.Started == 0 {
		t.Fatal("solved without a migration: the test no longer reaches the executor")
	}
	rt.mu.Lock()
	errs := slices.Clone(rt.natsErrs)
	rt.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("NATS errors under the agents' permissions (a subject they use is not allowed): %v", errs)
	}
}
