package node_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// holdAttack is the one-key region freeze: the insider, signing as
// compute-4, reads the requests and updates sent to the other agents and
// takes over every partition it hears of (an update one version up naming
// itself leader), then keeps each one alive with a leader's heartbeat
// every tick and never plans.
type holdAttack struct {
	rt   *redTeam
	mu   sync.Mutex
	held map[string]scheduler.Partition
	sent atomic.Int64
}

func (h *holdAttack) start(ctx context.Context, wg *sync.WaitGroup) {
	h.held = map[string]scheduler.Partition{}
	for _, victim := range h.rt.hosts[:3] {
		sub, err := bus.SubscribeFrom(h.rt.inside, bus.AgentSubject(rtRegion, victim), func(_, _ string, data []byte) { h.heard(data) })
		if err != nil {
			h.rt.t.Fatal(err)
		}
		h.rt.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	wg.Go(func() {
		tick := time.NewTicker(h.rt.clock.Wall(node.DefaultConfig().Tick)) // one agent tick
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			h.mu.Lock()
			held := make([]scheduler.Partition, 0, len(h.held))
			for _, p := range h.held {
				held = append(held, p)
			}
			h.mu.Unlock()
			for _, p := range held {
				for _, n := range p.Nodes {
					if n != "compute-4" {
						h.send(n, scheduler.Message{Type: scheduler.MsgHeartbeat, From: "compute-4", PartID: p.ID, Version: p.Version})
					}
				}
			}
		}
	})
}

func (h *holdAttack) heard(data []byte) {
	m, err := scheduler.Decode(data)
	if err != nil || m.Part == nil || m.Part.Leader == "compute-4" || (m.Type != scheduler.MsgGrow && m.Type != scheduler.MsgUpdate) {
		return
	}
	p := *m.Part
	h.mu.Lock()
	if old, ok := h.held[p.ID]; ok && old.Version > p.Version {
		h.mu.Unlock()
		return
	}
	p.Version++
	p.Leader, p.State = "compute-4", scheduler.Growing
	p.Nodes = slices.Clone(p.Nodes)
	if !slices.Contains(p.Nodes, "compute-4") {
		p.Nodes = append(p.Nodes, "compute-4")
	}
	h.held[p.ID] = p
	h.mu.Unlock()
	for _, n := range p.Nodes {
		if n != "compute-4" {
			h.send(n, scheduler.Message{Type: scheduler.MsgUpdate, From: "compute-4", PartID: p.ID, Version: p.Version, Part: &p})
		}
	}
}

func (h *holdAttack) send(to string, m scheduler.Message) {
	data, err := scheduler.Encode(m)
	if err != nil {
		h.rt.t.Error(err)
		return
	}
	if err := h.rt.inside.Publish(context.Background(), bus.AgentSubject(rtRegion, to), data); err == nil {
		h.sent.Add(1)
	}
}

// holdRun overloads compute-1 on a fresh region (the runtime tuned by
// tune), with or without the hold attack, and reports how much agent time
// the overload took to solve (within limit; solved false past it), how
// long compute-1 was held in partitions the insider led, and the bounds'
// drops.
type holdRun struct {
	solved     bool
	took, held time.Duration
	attackSent int64
	boundDrops int64
	// lag: the longest a 10 ms wall-clock ticker in the test process
	// woke late during the run (the process starved of CPU).
	lag time.Duration
}

// starved says why a hold run cannot be judged for liveness ("" when it
// can): the agents' clock runs holdScale x the wall's whether or not
// they keep up, and the protocol's timeouts are on it (a request without
// progress for ProgressTimeout, 1 s of wall time, is lost). Seen on a machine
// loaded by two unit tiers and a functional cloud (load 25 on 2 cores):
// compute-1's requests called lost one after another, the overload
// unsolved after 30 partition timeouts with the bounds and even without
// the attack, while compute-1 was held 3.9 s by the key.
func (r holdRun) starved() string {
	if lim := time.Duration(float64(scheduler.DefaultConfig("x").ProgressTimeout) / holdScale / 4); r.lag > lim {
		return fmt.Sprintf("the test process woke %s late (over %s, a quarter of the progress timeout's wall time)", r.lag, lim)
	}
	return ""
}

// holdPartitionTimeout is the agents' partition_timeout in the hold
// runs, and the lead_timeout of the bounded ones: progress_timeout plus
// hop_timeout times the region's hosts, plus a tick, as the bounds'
// documentation asks of lead_timeout (a fair leader's request may take
// that long to come back). With lead_timeout at the default partition
// timeout (3.5 s, below progress_timeout) the bound refused fair leaders
// whose request was still out, one after another on a loaded machine,
// until compute-1 refused every other host and found no solution.
func holdPartitionTimeout() time.Duration {
	c := scheduler.DefaultConfig("x")
	return c.ProgressTimeout + 4*c.HopTimeout + node.DefaultConfig().Tick
}

// holdScale: the agents' clock runs holdScale x the wall's. At 10 x,
// on a machine loaded by another package's race tests (load 6 on 2
// cores), the honest agents' snapshots and takeovers came late in agent
// time (a snapshot timeout is 150 ms of wall time there) while the test
// process woke on time, and the key won races a loaded host loses but a
// real one does not; at 5 x, with holdPartitionTimeout, 10 runs in 10
// passed under the same load.
const holdScale = 5

// lagWatch measures how late a 10 ms ticker wakes until ctx ends.
func lagWatch(ctx context.Context, wg *sync.WaitGroup) func() time.Duration {
	var mu sync.Mutex
	var worst time.Duration
	wg.Go(func() {
		const period = 10 * time.Millisecond
		tick := time.NewTicker(period)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				now := time.Now()
				mu.Lock()
				worst = max(worst, now.Sub(last)-period)
				mu.Unlock()
				last = now
			}
		}
	})
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return worst
	}
}

func runHold(t *testing.T, attack bool, tune func(*node.Config), limit time.Duration) holdRun {
	ctx, cancel := context.WithCancel(context.Background())
	rt := startRedTeamWith(t, ctx, false, tune, func(c *scheduler.Config) { c.PartitionTimeout = holdPartitionTimeout() }, holdScale)
	var wg sync.WaitGroup
	defer rt.wg.Wait()
	defer wg.Wait()
	defer cancel()
	var ha *holdAttack
	if attack {
		ha = &holdAttack{rt: rt}
		ha.start(ctx, &wg)
	}
	var out holdRun
	lag := lagWatch(ctx, &wg)
	start := rt.clock.Now()
	for j := range 2 {
		_ = rt.cloud.SetDemand(fmt.Sprintf("s-1-%d", j), nova.Demand{CPU: 5, RAMMB: 1024}) // 10 > 8 cores
	}
	var heldFrom time.Time
	out.solved = waitFor(t, rt.clock.Wall(limit), func() bool {
		now := rt.clock.Now()
		p := rt.runners["compute-1"].Partition()
		switch {
		case p != nil && p.Leader == "compute-4" && heldFrom.IsZero():
			heldFrom = now
		case (p == nil || p.Leader != "compute-4") && !heldFrom.IsZero():
			out.held += now.Sub(heldFrom)
			heldFrom = time.Time{}
		}
		return !rt.cloud.Overloaded("compute-1")
	})
	out.took = rt.clock.Now().Sub(start)
	out.lag = lag()
	if !out.solved {
		for _, h := range rt.hosts {
			if p := rt.runners[h].Partition(); p != nil {
				t.Logf("%s at the end: partition %s led by %s, %v, %s", h, p.ID, p.Leader, p.Nodes, p.State)
			}
		}
		l := strings.Split(rt.logs.String(), "\n")
		t.Logf("unsolved: the agents' last log lines:\n%s", strings.Join(l[max(0, len(l)-200):], "\n"))
	}
	if !heldFrom.IsZero() {
		out.held += rt.clock.Now().Sub(heldFrom)
	}
	if ha != nil {
		out.attackSent = ha.sent.Load()
	}
	for _, r := range rt.runners {
		for _, n := range r.BoundDrops() {
			out.boundDrops += n
		}
	}
	if v := rt.cloud.Violations(); len(v) > 0 || rt.cloud.ServersLost() != 0 {
		t.Errorf("violations %v, lost %d", v, rt.cloud.ServersLost())
	}
	return out
}

// The one-key region freeze replayed: with one stolen key an insider took
// over every partition it heard of and held it with heartbeats, never a
// plan, and a real overload stayed unsolved (the control, without bounds,
// shows it still does). With lead_timeout at one partition timeout each
// agent is held at most that long by the key: past it the agent leaves
// (the initiator's event is raised again at once), refuses the key and
// drops its takeovers, and leaves at once a partition the key claims
// (others may have followed it, a few times per refusal). compute-1's
// event is held by the key at most one partition timeout in all. The
// overload is solved later than without the attack by the time the other
// agents on its path take to reach their own bounds (no agent takes
// another's word against a key, and a member whose leader followed the
// key waits for it a partition timeout, then backs off): 1 to 7 partition
// timeouts on a busy machine under -race; the test allows 10, and the
// control, without bounds, is still unsolved after them.
func TestRedTeamOneKeyCannotHoldTheRegion(t *testing.T) {
	pt := holdPartitionTimeout()
	bounded := func(c *node.Config) { c.Bounds.LeadTimeout = pt }
	unbounded := func(c *node.Config) { c.Bounds = node.BoundsConfig{} }

	// A run the machine starved is not judged for liveness: it is run
	// again, and the test skipped when none kept up.
	kept := func(what string, run func() holdRun) holdRun {
		t.Helper()
		for attempt := 1; ; attempt++ {
			r := run()
			why := r.starved()
			if r.solved || why == "" {
				return r
			}
			if attempt == 3 {
				t.Skipf("%s: %d runs unsolved on a starved machine, the last: %s", what, attempt, why)
			}
			t.Logf("%s: unsolved on a starved machine (%s): again", what, why)
		}
	}
	base := kept("without the attack", func() holdRun { return runHold(t, false, bounded, time.Minute) })
	if !base.solved {
		t.Fatalf("without the attack the overload was not solved in a minute of agent time: %+v", base)
	}
	t.Logf("without the attack: solved in %s (agent time), process late by %s at worst", base.took, base.lag)
	// slack: the agents' tick and the monitor's sample, on a busy machine.
	const slack = 5 * time.Second
	within := base.took + 10*pt + slack

	ctl := runHold(t, true, unbounded, within)
	t.Logf("attack, no bounds: solved %v after %s, compute-1 held %s, %d forged messages", ctl.solved, ctl.took, ctl.held, ctl.attackSent)
	if ctl.solved || ctl.held < pt {
		t.Fatalf("the control no longer reproduces the freeze (solved %v, held %s): the test proves nothing", ctl.solved, ctl.held)
	}

	// A run in which the key never reached the bound (the honest agents
	// solved the overload before it held anyone a partition timeout: its
	// goroutine starved, or its takeovers came late) is run again: it
	// proves nothing about the bound.
	var got holdRun
	for attempt := 1; ; attempt++ {
		got = kept("attack, lead_timeout", func() holdRun { return runHold(t, true, bounded, within) })
		t.Logf("attack, lead_timeout %s: solved %v after %s, compute-1 held %s, %d forged messages, %d dropped by the bounds",
			pt, got.solved, got.took, got.held, got.attackSent, got.boundDrops)
		if got.boundDrops > 0 || !got.solved || got.held >= pt {
			break
		}
		if attempt == 3 {
			t.Skipf("in %d runs the key never held compute-1 a partition timeout before the overload was solved: the bound was not exercised", attempt)
		}
		t.Log("the key was never refused: the attack did not reach the bound, again")
	}
	if !got.solved {
		t.Fatalf("the overload was not solved within %s (unattacked %s + 10 partition timeouts + %s)", within, base.took, slack)
	}
	if tick := node.DefaultConfig().Tick; got.held > pt+2*tick {
		t.Errorf("compute-1 was held %s by the insider, bound %s", got.held, pt)
	}
	if got.boundDrops == 0 {
		t.Error("no takeover was dropped by the bounds: the key was never refused")
	}
}
