package sim

// Adversaries (--byzantine): a fraction of the hosts run agents with valid
// keys that do not play fair. Each such agent
//
//   - answers falsely: its demand source claims a twentieth of what its
//     servers use, so its snapshots and its answers to the executors'
//     demand queries make its host look nearly empty;
//   - forges events: every 20-40 simulated seconds a request for a
//     partition of its own, alternately an overload of its own host it
//     does not have and a MAINTENANCE of an honest host (sent to that
//     host, as the red team's insider did), which no operator asked for;
//   - holds partitions: it takes over every partition it hears of while
//     its agent is busy, and every partition of its forged overloads once
//     an honest agent joined it (an update two versions up naming itself
//     leader), then keeps it alive with a leader's heartbeat every tick and
//     never plans; its own agent's messages about those partitions are
//     swallowed (they would give the game away).
//
// The report counts them, the messages the honest agents' bounds dropped,
// the honest events held by an adversary longer than one partition
// timeout, and the servers moved off an honest host under a forged event
// (host consent must make that 0).

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// byzSeed separates the adversaries' draws from the run's (a run with
// and one without adversaries share everything else).
const byzSeed = 7727

// byzLie is the fraction of its demand an adversary reports.
const byzLie = 0.05

// ByzantineReport is what --byzantine did and what it cost.
type ByzantineReport struct {
	Hosts int `json:"hosts"`
	// Forged: requests of forged events sent (Maintenance: of them, for
	// an honest host); Takeovers: partitions taken over; Heartbeats:
	// leader's heartbeats sent to hold them.
	Forged      int64 `json:"forged_events"`
	Maintenance int64 `json:"forged_maintenance"`
	Takeovers   int64 `json:"takeovers"`
	Heartbeats  int64 `json:"heartbeats"`
	// DroppedRate and DroppedRefused: messages the honest agents' bounds
	// dropped (node.BoundRate, node.BoundRefused).
	DroppedRate    int64 `json:"dropped_by_rate"`
	DroppedRefused int64 `json:"dropped_refused"`
	// EventsHeld: honest events whose partition an adversary led for
	// longer than one partition timeout (seen every simulated second).
	EventsHeld int `json:"events_held_over_partition_timeout"`
	// LeaderRefused: honest events ended because their partition's leader
	// was refused (a plan of it had run, or the event's condition was
	// gone by the time it could go on); LeftRefused: partitions an honest
	// agent left for a refused leader (an event that no plan of it ran
	// went on under its own id in a fresh partition).
	LeaderRefused int `json:"events_ended_leader_refused"`
	LeftRefused   int `json:"partitions_left_leader_refused"`
	// MovedWithoutConsent: servers moved off an honest host by a plan for
	// a forged event.
	MovedWithoutConsent int64 `json:"moved_without_consent"`
	// OntoAdversary: the violations (counted in Safety.Violations) whose
	// destination is an adversary's host, which under-reported its
	// demand to attract the server.
	OntoAdversary int `json:"violations_onto_adversary"`
	// LongestHonestLeadS: the longest an honest key led one partition an
	// honest agent was in, outside a plan (seen every simulated second):
	// lead_timeout must stay above it.
	LongestHonestLeadS float64 `json:"longest_honest_lead_s"`
	// Distrusted: at the end, the adversaries some honest agent's
	// executor caught under-reporting a server it received (and no
	// longer takes as a destination), and the blames of adversaries
	// summed over the honest agents; FalseBlames: honest hosts some
	// honest agent distrusts.
	Distrusted  int `json:"adversaries_distrusted"`
	Blames      int `json:"blames_of_adversaries"`
	FalseBlames int `json:"honest_hosts_distrusted"`
	// Implausible: the adversaries some honest agent's planner or
	// executor judged implausible as a destination (their word against
	// their flavors and their partition's hosts, scheduler/plausible.go);
	// FalseImplausible: the honest hosts so judged.
	Implausible      int `json:"adversaries_implausible"`
	FalseImplausible int `json:"honest_hosts_implausible"`
}

type adversaries struct {
	region string
	hosts  []string
	byz    map[string]bool
	honest []string
	clock  *node.Scaled
	nc     bus.Transport
	pt     time.Duration
	// busy says whether an adversary's own agent is in a partition.
	busy func(host string) bool

	mu     sync.Mutex
	held   map[string]scheduler.Partition // partition id -> as held (leader: the adversary)
	forged map[string]bool                // forged partition ids
	drains map[string]bool                // of them, MAINTENANCE of an honest host
	events map[string]bool                // forged event ids
	// seen: honest partitions led by an adversary, when first seen.
	seen    map[string]time.Time
	heldFor map[string]bool // those held past one partition timeout
	// leads: honest leaders' stints outside a plan (partition|leader ->
	// first seen); longest: the longest.
	leads   map[string]time.Time
	longest time.Duration

	forgedN, maint, takeovers, heartbeats, moved atomic.Int64
}

func pickAdversaries(frac float64, hosts []string, seed int64) map[string]bool {
	n := int(frac*float64(len(hosts)) + 0.5)
	out := make(map[string]bool, n)
	for _, i := range rand.New(rand.NewSource(seed + byzSeed)).Perm(len(hosts))[:n] {
		out[hosts[i]] = true
	}
	return out
}

func newAdversaries(cfg Config, hosts []string, clock *node.Scaled, nc bus.Transport) *adversaries {
	a := &adversaries{region: cfg.Runtime.Region, hosts: hosts, byz: pickAdversaries(cfg.Byzantine, hosts, cfg.Seed), clock: clock, nc: nc,
		pt: cfg.Agent.PartitionTimeout, held: map[string]scheduler.Partition{}, forged: map[string]bool{}, drains: map[string]bool{}, events: map[string]bool{},
		seen: map[string]time.Time{}, heldFor: map[string]bool{}, leads: map[string]time.Time{}}
	for _, h := range hosts {
		if !a.byz[h] {
			a.honest = append(a.honest, h)
		}
	}
	return a
}

// liar reports a twentieth of its host's demand.
type liar struct{ nova.DemandSource }

func (l liar) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	d, err := l.DemandSource.Demand(ctx, host)
	for id, x := range d {
		d[id] = nova.Demand{CPU: x.CPU * byzLie, RAMMB: x.RAMMB * byzLie}
	}
	return d, err
}

// muzzle is an adversary's agent's transport: its messages about the
// partitions the adversary holds or forged are swallowed.
type muzzle struct {
	bus.Transport
	a *adversaries
}

func (m muzzle) Publish(ctx context.Context, subject string, data []byte) error {
	if strings.Contains(subject, ".agent.") {
		if msg, err := scheduler.Decode(data); err == nil && m.a.holds(msg.PartID) {
			return nil
		}
	}
	return m.Transport.Publish(ctx, subject, data)
}

func (a *adversaries) holds(part string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, held := a.held[part]
	return held || a.forged[part]
}

func (a *adversaries) send(from, to string, m scheduler.Message) {
	m.From = from
	data, err := scheduler.Encode(m)
	if err == nil {
		_ = a.nc.Publish(context.Background(), bus.AgentSubject(a.region, to), data)
	}
}

// run is adversary host's loop until ctx ends.
func (a *adversaries) run(ctx context.Context, host string, seed int64) error {
	sub, err := a.nc.Subscribe(bus.AgentSubject(a.region, host), func(_ string, data []byte) { a.heard(host, data) })
	if err != nil {
		return fmt.Errorf("adversary %s: %w", host, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	rng := rand.New(rand.NewSource(seed))
	tick := a.clock.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	next := a.clock.Now().Add(time.Duration(10+rng.Intn(30)) * time.Second)
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		a.heartbeat(host)
		if now := a.clock.Now(); now.After(next) {
			n++
			a.forge(host, n, rng)
			next = now.Add(time.Duration(20+rng.Intn(20)) * time.Second)
		}
	}
}

func (a *adversaries) heartbeat(host string) {
	a.mu.Lock()
	var held []scheduler.Partition
	for _, p := range a.held {
		if p.Leader == host {
			held = append(held, p)
		}
	}
	a.mu.Unlock()
	for _, p := range held {
		for _, n := range p.Nodes {
			if n != host {
				a.send(host, n, scheduler.Message{Type: scheduler.MsgHeartbeat, PartID: p.ID, Version: p.Version})
				a.heartbeats.Add(1)
			}
		}
	}
}

// forge sends the request of a forged event: an overload of host itself
// (odd n) or a MAINTENANCE of an honest host, sent to that host.
func (a *adversaries) forge(host string, n int, rng *rand.Rand) {
	victim := a.honest[rng.Intn(len(a.honest))]
	ev := scheduler.Event{ID: fmt.Sprintf("ev-%s-byz-%d", host, n), Kind: scheduler.Overload, Host: host, Detected: a.clock.Now()}
	p := scheduler.Partition{Version: 1, Initiator: host, Leader: host, Nodes: []string{host}, State: scheduler.Growing}
	if n%2 == 0 {
		ev.ID, ev.Kind, ev.Host = fmt.Sprintf("ev-%s-byz-%s-%d", victim, host, n), scheduler.Maintenance, victim
		p.Initiator, p.Nodes = victim, []string{victim, host}
		a.maint.Add(1)
	}
	p.ID, p.Events = "p-"+ev.ID, []scheduler.Event{ev}
	a.mu.Lock()
	a.forged[p.ID], a.events[ev.ID], a.drains[p.ID] = true, true, ev.Kind == scheduler.Maintenance
	a.mu.Unlock()
	a.forgedN.Add(1)
	a.send(host, victim, scheduler.Message{Type: scheduler.MsgGrow, PartID: p.ID, Version: p.Version, Part: &p})
}

// heard: a message to adversary host. It takes over a partition it hears
// of while its agent is busy, and its forged partitions once an honest
// agent leads them.
func (a *adversaries) heard(host string, data []byte) {
	m, err := scheduler.Decode(data)
	if err != nil || m.Part == nil || m.Part.Leader == host || a.byz[m.Part.Leader] {
		return
	}
	a.mu.Lock()
	forged, drain := a.forged[m.Part.ID], a.drains[m.Part.ID]
	a.mu.Unlock()
	switch {
	case m.Type == scheduler.MsgUpdate && forged && !drain:
		// A forged drain is left to run: its victim plans it, and the
		// executor's consent checks must refuse every move.
	case m.Type == scheduler.MsgGrow && a.busy(host):
	default:
		return
	}
	p := *m.Part
	p.Version += 2 // past the version a free node joining the request makes
	p.Leader, p.State = host, scheduler.Growing
	p.Nodes = slices.Clone(p.Nodes)
	if !slices.Contains(p.Nodes, host) {
		p.Nodes = append(p.Nodes, host)
	}
	a.mu.Lock()
	if old, ok := a.held[p.ID]; ok && old.Version >= p.Version {
		a.mu.Unlock()
		return
	}
	a.held[p.ID] = p
	a.mu.Unlock()
	a.takeovers.Add(1)
	for _, n := range p.Nodes {
		if n != host {
			a.send(host, n, scheduler.Message{Type: scheduler.MsgUpdate, PartID: p.ID, Version: p.Version, Part: &p})
		}
	}
}

// observe notes, once a simulated second, the honest agents' partitions an
// adversary leads (their initiators' own events: forged ones aside).
func (a *adversaries) observe(now time.Time, host string, p *scheduler.Partition) {
	if p == nil || p.Leader == host {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.byz[p.Leader] {
		if p.State != scheduler.Finishing {
			k := p.ID + "|" + p.Leader
			first, ok := a.leads[k]
			if !ok {
				first = now
				a.leads[k] = now
			}
			a.longest = max(a.longest, now.Sub(first))
		}
		return
	}
	if p.Initiator != host || len(p.Events) == 0 {
		return
	}
	if a.events[p.Events[0].ID] {
		return
	}
	first, ok := a.seen[p.ID]
	if !ok {
		a.seen[p.ID] = now
		return
	}
	if now.Sub(first) > a.pt {
		a.heldFor[p.ID] = true
	}
}

// executed counts the servers a plan for a forged event moved off an
// honest host.
func (a *adversaries) executed(ev scheduler.Event, res node.ExecResult) {
	a.mu.Lock()
	forged := a.events[ev.ID]
	a.mu.Unlock()
	if !forged {
		return
	}
	for _, r := range res.Actions {
		if r.Outcome == node.ActionDone && !a.byz[r.Action.From] {
			a.moved.Add(1)
		}
	}
}

func (a *adversaries) report(rep *Report, runners []*node.Runner, refused, left int, v []fake.Violation) {
	b := &ByzantineReport{Hosts: len(a.byz), Forged: a.forgedN.Load(), Maintenance: a.maint.Load(), Takeovers: a.takeovers.Load(),
		Heartbeats: a.heartbeats.Load(), MovedWithoutConsent: a.moved.Load(), LeaderRefused: refused, LeftRefused: left}
	for _, x := range v {
		if dest, ok := violationDestination(x); ok && a.byz[dest] {
			b.OntoAdversary++
		}
	}
	caught, wrong := map[string]bool{}, map[string]bool{}
	floored, falseFloored := map[string]bool{}, map[string]bool{}
	for _, r := range runners {
		for _, h := range r.Distrusted() {
			if a.byz[h] {
				caught[h] = true
				b.Blames++
			} else {
				wrong[h] = true
			}
		}
		for _, h := range r.Implausible() {
			if a.byz[h] {
				floored[h] = true
			} else {
				falseFloored[h] = true
			}
		}
		d := r.BoundDrops()
		b.DroppedRate += d[node.BoundRate]
		b.DroppedRefused += d[node.BoundRefused]
	}
	b.Distrusted, b.FalseBlames = len(caught), len(wrong)
	b.Implausible, b.FalseImplausible = len(floored), len(falseFloored)
	a.mu.Lock()
	b.EventsHeld, b.LongestHonestLeadS = len(a.heldFor), round(a.longest.Seconds())
	a.mu.Unlock()
	rep.Byzantine = b
}

// violationDestination is the destination host a plan-overloads-destination
// violation names.
func violationDestination(v fake.Violation) (string, bool) {
	if v.Kind != fake.KindOverload {
		return "", false
	}
	_, rest, ok := strings.Cut(v.Message, "destination ")
	if !ok {
		return "", false
	}
	dest, _, _ := strings.Cut(rest, " ")
	return dest, true
}
