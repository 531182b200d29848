package scheduler

import (
	"fmt"
	"slices"
	"time"
)

type phase uint8

const (
	phNone       phase = iota
	phWaiting          // request in flight, waiting for a node
	phCollecting       // gathering snapshots
	phSolving          // solver running
	phExecuting        // plan running
)

// Agent is the DVMS state machine of one host. It is not safe for
// concurrent use: one goroutine owns it (scheduler/node).
type Agent struct {
	cfg  Config
	ring []string // live members, sorted
	// ringOwned: ring is this agent's own copy; otherwise it is a Ring
	// shared with other agents, copied before the first change.
	ringOwned bool
	// orders caches the next-node order per initiator (nextnode.go).
	orders map[string]*order
	now    time.Time
	seq    uint64

	part *Partition
	// fromLeader (a member) is when its leader last spoke: heartbeat,
	// update or absorption. progress (the leader) is when its partition
	// last moved on: the request sent, snapshots asked for.
	fromLeader time.Time
	progress   time.Time

	// leader state
	phase     phase
	snaps     map[string]Host
	snapSince time.Time
	snapAsked bool // the missing snapshots were asked for again
	merging   bool
	// back: the leader's own request came back while a merge was pending
	// (backMet: it met another Blocked partition); the tour is finished
	// once the merge is refused (tourDone).
	back, backMet bool
	// offered: a Blocked partition that may absorb this one met it since
	// its last tour (a merge may still commit): the tour counts as met.
	offered bool
	// lastLook: the partition's tours are over and it solves once more
	// on fresh snapshots before giving up (tourDone); no solution then
	// ends it Unsolvable (SolveDone).
	lastLook bool
	// reliefDeferred (leader): the partition passed over a solution that
	// only fits to grow for destinations with relief headroom
	// (Config.ReliefHeadroom); noRelief: its request came back without a
	// node, so it solves for any destination that fits.
	reliefDeferred, noRelief bool
	solved                   []string // events the plan being executed solves
	// planRan (any member): a plan ran on the partition (it was seen
	// Finishing); its members' samples are stale when it ends.
	planRan bool

	// own host
	host    Host
	hasHost bool
	// stale: a plan ran on the partition this agent was in; its host's
	// last sample may list servers that left or miss some that came, so
	// it offers no snapshot until the next sample (Observe).
	stale   bool
	window  []EventKind        // last N classifications
	arrived map[string]arrival // server -> when first seen on the host
	active  *Event             // own event being handled
	backoff time.Duration
	retryAt time.Time

	// ended: partitions that ended here recently, at which version; their
	// requests up to that version are dropped (a newer one means the
	// partition went on without this agent: it was a fork's leader).
	ended map[string]ended
	// absorbed remembers partitions this agent knows were absorbed, for
	// longer than ended and than the arbiter's tombstone (which lives one
	// lease): such a partition is never joined, led or registered again.
	absorbed map[string]time.Time
	rd       Ready

	retired bool // stopping: raises no event, joins no partition
	// The operator's run-time controls (Control): paused, the agent
	// raises no event; excluded, it raises none and joins no partition.
	paused, excluded bool
	// held (Hold): the moves of a plan whose leader was lost may still
	// run in Nova; it raises no event and joins no partition.
	held bool
}

type ended struct {
	at      time.Time
	version uint64
}

// NewAgent returns a free agent. members is the initial ring.
func NewAgent(cfg Config, members []string) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.ID, err)
	}
	return NewAgentOnRing(cfg, NewRing(members))
}

// NewAgentOnRing returns a free agent whose initial ring is r, shared
// (not copied) until the agent's membership changes: many agents in one
// process (dvms simulate) hold one member list, not one each.
func NewAgentOnRing(cfg Config, r Ring) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.ID, err)
	}
	a := &Agent{cfg: cfg, orders: map[string]*order{}, ended: map[string]ended{}, absorbed: map[string]time.Time{}, backoff: cfg.RetryBackoff}
	a.SetRing(r)
	return a, nil
}

// Ring is an immutable member list, sorted and without duplicates, that
// agents share (NewAgentOnRing, SetRing).
type Ring struct{ ids []string }

// NewRing returns the ring of members (copied).
func NewRing(members []string) Ring {
	r := slices.Clone(members)
	slices.Sort(r)
	return Ring{ids: slices.Compact(r)}
}

// Len is the ring's size.
func (r Ring) Len() int { return len(r.ids) }

// ID is the agent's host.
func (a *Agent) ID() string { return a.cfg.ID }

// Partition returns a copy of the agent's partition, or nil when free.
func (a *Agent) Partition() *Partition {
	if a.part == nil {
		return nil
	}
	return a.part.clone()
}

// ActiveEvent returns the agent's own event in progress, if any.
func (a *Agent) ActiveEvent() *Event {
	if a.active == nil {
		return nil
	}
	e := *a.active
	return &e
}

// Ready returns and clears the pending output.
func (a *Agent) Ready() Ready {
	r := a.rd
	a.rd = Ready{}
	return r
}

// SetMembers replaces the ring (live members, this agent included or not).
func (a *Agent) SetMembers(members []string) { a.SetRing(NewRing(members)) }

// SetRing replaces the ring with r, shared until the agent changes it
// (this agent is added to its own copy if r lacks it).
func (a *Agent) SetRing(r Ring) {
	a.ringChanged()
	a.ring, a.ringOwned = r.ids, false
	if i, ok := slices.BinarySearch(a.ring, a.cfg.ID); !ok {
		a.ownRing()
		a.ring = slices.Insert(a.ring, i, a.cfg.ID)
	}
}

// ownRing makes the ring this agent's own copy before a change.
func (a *Agent) ownRing() {
	if !a.ringOwned {
		a.ring, a.ringOwned = slices.Clone(a.ring), true
	}
}

// MemberUp adds a (re)joined member to the ring.
func (a *Agent) MemberUp(id string) {
	if i, ok := slices.BinarySearch(a.ring, id); !ok {
		a.ownRing()
		a.ring = slices.Insert(a.ring, i, id)
		a.ringChanged()
	}
}

// Members returns the ring.
func (a *Agent) Members() []string { return slices.Clone(a.ring) }

func (a *Agent) leader() bool { return a.part != nil && a.part.Leader == a.cfg.ID }

func (a *Agent) send(to string, m Message) {
	m.From = a.cfg.ID
	a.rd.Messages = append(a.rd.Messages, Envelope{To: to, Msg: m})
}

func (a *Agent) record(r Record) {
	if r.Partition == "" && a.part != nil {
		r.Partition, r.Version, r.Size = a.part.ID, a.part.Version, len(a.part.Nodes)
	}
	a.rd.Records = append(a.rd.Records, r)
}

// broadcast sends m to every member but this agent.
func (a *Agent) broadcast(m Message) {
	for _, n := range a.part.Nodes {
		if n != a.cfg.ID {
			a.send(n, m)
		}
	}
}

func (a *Agent) update() Message {
	return Message{Type: MsgUpdate, PartID: a.part.ID, Version: a.part.Version, Part: a.part.clone()}
}

// Tick advances time: timeouts, heartbeats and retries.
func (a *Agent) Tick(now time.Time) {
	a.now = now
	for id, e := range a.ended {
		if now.Sub(e.at) > 4*a.cfg.PartitionTimeout {
			delete(a.ended, id)
		}
	}
	for id, t := range a.absorbed {
		if now.Sub(t) > absorbedMemory*a.cfg.Lease {
			delete(a.absorbed, id)
		}
	}
	if p := a.part; p != nil {
		if a.leader() {
			a.broadcast(Message{Type: MsgHeartbeat, PartID: p.ID, Version: p.Version})
			switch {
			case a.phase == phCollecting && now.Sub(a.snapSince) > a.cfg.SnapshotTimeout:
				a.snapshotTimeout()
			case a.phase == phCollecting && !a.snapAsked && now.Sub(a.snapSince) > a.cfg.SnapshotTimeout/2:
				a.askMissing()
			case a.phase == phWaiting && !a.merging && now.Sub(a.progress) > a.requestTimeout() && a.reliefDeferred:
				// Lost while growing for relief headroom: what fits will
				// do. A new version makes the request stale, should it
				// still find a node.
				a.part.Version++
				a.reliefDone()
			case a.phase == phWaiting && !a.merging && now.Sub(a.progress) > a.requestTimeout():
				a.dissolve(Aborted, EndRequestLost, "request lost: no progress")
			}
		} else if now.Sub(a.fromLeader) > a.memberTimeout() {
			a.dissolve(Aborted, EndTimeout, "partition timeout: no word from leader "+p.Leader)
		}
	}
	a.maybeStart()
}

// Step handles one message.
func (a *Agent) Step(m Message) {
	if why := a.admissible(m); why != "" {
		a.drop(m, why)
		return
	}
	switch m.Type {
	case MsgGrow:
		a.onGrow(m)
	case MsgUpdate:
		a.onUpdate(m)
	case MsgHeartbeat:
		if a.part != nil && a.part.ID == m.PartID && m.From == a.part.Leader && m.Version >= a.part.Version {
			a.fromLeader = a.now
		} else if a.part == nil || a.part.ID != m.PartID {
			a.send(m.From, Message{Type: MsgNack, PartID: m.PartID, Version: m.Version, Reason: "not a member"})
		}
	case MsgSnapshot:
		a.onSnapshot(m)
	case MsgDissolve:
		a.onDissolve(m)
	case MsgMergeOffer:
		a.onMergeOffer(m)
	case MsgAbsorbed:
		a.onAbsorbed(m)
	case MsgNack:
		if a.leader() && a.part.ID == m.PartID && a.part.has(m.From) {
			a.removeMember(m.From, m.Reason)
		}
	}
}

func (a *Agent) drop(m Message, reason string) {
	a.rd.Records = append(a.rd.Records, Record{Kind: RecDropped, Partition: m.PartID, Version: m.Version, Reason: m.Type.String() + ": " + reason})
}

func ptr[T any](v T) *T { return &v }
