package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// Agent is the DVMS state machine of one host. It is not safe for
// concurrent use: one goroutine owns it (scheduler/node). Its roles
// (idle, member, leader), a leader's phases and the step function of
// each are in states.go; what only a leader holds is in leading.
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

	// part is the agent's partition (nil: free); it decides the agent's
	// role (states.go), which only setPart changes.
	part *Partition
	// lead is the leader's own state, nil unless the agent leads part.
	lead *leading
	// fromLeader (a member) is when its leader last spoke: heartbeat,
	// update or absorption.
	fromLeader time.Time
	// planRan (any member, the leader too): a plan ran on the partition
	// (it was seen Finishing); its members' samples are stale when it
	// ends.
	planRan bool

	// own host
	host    Host
	hasHost bool
	// stale: a plan ran on the partition this agent was in; its host's
	// last sample may list servers that left or miss some that came, so
	// it offers no snapshot until the next sample (Observe).
	stale   bool
	window  []EventKind         // last N classifications
	arrived map[string]arrival  // server -> when first seen on the host
	peaks   map[string]*profile // server -> its demand within the peak window (peak.go)
	carried map[string]*profile // server on its way here -> its source's profile (peak.go)
	// overFor: how long the host's overload has held since a server
	// last left it (Host.OverFor); overAt: the sample it was counted to.
	overFor time.Duration
	overAt  time.Time
	active  *Event // own event being handled
	// resume: the own event a refused leader held, going on under its
	// own id on the next tick (RefuseLeader); resumed counts its fresh
	// partitions (their ids).
	resume  *Event
	resumed int
	// resumeEnd: the class and reason the resumed event ends with if
	// its condition is gone by then (leader_refused when empty); goneOn:
	// the times the active event went on after its partition was lost
	// (goOn, at most maxGoOn).
	resumeEnd EndClass
	resumeWhy string
	goneOn    int
	// resumeAt: a lost partition's event goes on no sooner (goOn: after
	// the runtime saw the partition's end, which may hold the agent while
	// granted moves end: adopt.go).
	resumeAt time.Time
	// refused: the keys this agent refuses (RefuseLeader, until
	// MemberUp): the partitions of its events avoid them
	// (Partition.Avoid).
	refused map[string]bool
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
	// heldKind and heldClass: the condition and hold class last
	// recorded (RecHeld), NoEvent and "" when none (held.go).
	heldKind  EventKind
	heldClass HoldClass
	// adopting (Hold): the moves of a plan whose leader was lost may
	// still run in Nova; it raises no event and joins no partition.
	adopting bool
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
	delete(a.refused, id)
	if i, ok := slices.BinarySearch(a.ring, id); !ok {
		a.ownRing()
		a.ring = slices.Insert(a.ring, i, id)
		a.ringChanged()
	}
}

// Members returns the ring.
func (a *Agent) Members() []string { return slices.Clone(a.ring) }

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

func (a *Agent) drop(m Message, reason string) {
	a.rd.Records = append(a.rd.Records, Record{Kind: RecDropped, Partition: m.PartID, Version: m.Version, Reason: m.Type.String() + ": " + reason})
}

func ptr[T any](v T) *T { return &v }
