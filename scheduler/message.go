package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// PartState is the state of a partition (DESIGN §5.1).
type PartState uint8

const (
	Growing PartState = iota + 1
	Blocked
	Finishing
)

func (s PartState) String() string {
	switch s {
	case Growing:
		return "growing"
	case Blocked:
		return "blocked"
	case Finishing:
		return "finishing"
	}
	return "unknown"
}

// Partition is the partition record every member holds. Each update
// increases Version; receivers ignore versions older than theirs.
type Partition struct {
	ID        string
	Version   uint64
	Initiator string
	Leader    string
	// Nodes in join order; the initiator first.
	Nodes []string
	State PartState
	// Events: the initiator's event first, then absorbed partitions'.
	Events []Event
	// Tours counts the times the partition's request came back to it
	// without finding a free node (1: Blocked, 2: dissolved).
	Tours int
	// Replans counts the partition's plans solved again after the
	// executor's re-checks skipped actions (Agent.PlanSkipped), at most
	// maxReplans; Moved are the actions of its plans Nova did, in order,
	// which every later leader applies to its members' snapshots (a
	// member's sample lists its servers as of its last read from Nova).
	Replans int      `json:",omitempty"`
	Moved   []Action `json:",omitempty"`
	// FitAt is the size at which the partition, growing for relief
	// headroom (Config.ReliefHeadroom), first found a solution that only
	// fits (0: none yet). Beyond reliefFirstFit the hosts around are
	// tight: it looks no further.
	FitAt int `json:",omitempty"`
	// Peak is the most nodes the partition had, when its plan released
	// members it did not use (0: it never did).
	Peak int `json:",omitempty"`
	// Avoid: the keys the initiator refused (its runtime's bounds on one
	// key: RefuseLeader) when it started the partition, at most
	// MaxAvoid. The partition's request goes past them and an agent
	// named there does not join it: the members' rings still hold a key
	// only the initiator refused, and a partition it joined or claimed
	// would make the initiator leave again (it sends a key it refuses no
	// snapshot). The initiator's word binds only its own partition.
	Avoid []string `json:",omitempty"`
}

// MaxAvoid bounds Partition.Avoid.
const MaxAvoid = 64

// size is the most nodes the partition had.
func (p *Partition) size() int { return max(len(p.Nodes), p.Peak) }

func (p *Partition) clone() *Partition {
	c := *p
	c.Nodes = slices.Clone(p.Nodes)
	c.Events = slices.Clone(p.Events)
	c.Moved = slices.Clone(p.Moved)
	c.Avoid = slices.Clone(p.Avoid)
	return &c
}

func (p *Partition) has(node string) bool { return slices.Contains(p.Nodes, node) }

// MsgType is the kind of an agent message.
type MsgType uint8

const (
	// MsgGrow carries a partition looking for a free node (the DVMS
	// iterative scheduling request).
	MsgGrow MsgType = iota + 1
	// MsgUpdate tells members a new version of their partition; members
	// answer a Growing update with their snapshot.
	MsgUpdate
	// MsgHeartbeat is the leader's keep-alive to members.
	MsgHeartbeat
	// MsgSnapshot is a member's host snapshot for the leader.
	MsgSnapshot
	// MsgDissolve frees the members of a partition.
	MsgDissolve
	// MsgMergeOffer tells a Blocked partition's leader that another
	// Blocked partition (Other) may be absorbed into it.
	MsgMergeOffer
	// MsgAbsorbed tells the members of an absorbed partition (Other)
	// that they now belong to Part.
	MsgAbsorbed
	// MsgNack tells a leader that the sender is not (or no longer) a
	// member of its partition.
	MsgNack
)

var msgNames = map[MsgType]string{
	MsgGrow: "grow", MsgUpdate: "update", MsgHeartbeat: "heartbeat", MsgSnapshot: "snapshot",
	MsgDissolve: "dissolve", MsgMergeOffer: "merge-offer", MsgAbsorbed: "absorbed", MsgNack: "nack",
}

func (t MsgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Outcome ends a partition or an event.
type Outcome uint8

const (
	// Solved: the plan was executed without a failure (or nothing was
	// left to do).
	Solved Outcome = iota + 1
	// Unsolvable: no solution after the second full tour.
	Unsolvable
	// Failed: an action of the plan failed.
	Failed
	// Aborted: timeout, crash of a member, or a conflict.
	Aborted
)

func (o Outcome) String() string {
	switch o {
	case Solved:
		return "solved"
	case Unsolvable:
		return "unsolvable"
	case Failed:
		return "failed"
	case Aborted:
		return "aborted"
	}
	return "none"
}

// Message is what agents exchange. Which fields are set depends on Type.
type Message struct {
	Type MsgType
	From string
	// PartID and Version name the partition version the message is about.
	PartID  string
	Version uint64
	// Part is the partition (Grow, Update, Absorbed).
	Part *Partition `json:",omitempty"`
	// Other is the partition to absorb (MergeOffer) or the absorbed one
	// (Absorbed).
	Other *Partition `json:",omitempty"`
	// Host is the sender's snapshot (Snapshot).
	Host *Host `json:",omitempty"`
	// Hops counts forwards of a Grow request.
	Hops int `json:",omitempty"`
	// Met marks a Grow request of a Blocked partition that passed another
	// Blocked partition (a merge was offered): its leader keeps it Blocked
	// for another tour instead of giving up (see Agent.tourDone).
	Met     bool    `json:",omitempty"`
	Outcome Outcome `json:",omitempty"`
	Reason  string  `json:",omitempty"`
	// Class sorts Reason (Dissolve); an older agent sends none (see
	// EndClass.Of).
	Class EndClass `json:",omitempty"`
	// Solved lists the events a Solved dissolution solved (Dissolve).
	Solved []string `json:",omitempty"`
	// Carried: the profiles of the servers a plan moves, for their
	// destinations (the Update that makes the partition Finishing, with a
	// destination peak window: peak.go).
	Carried []Carried `json:",omitempty"`
}

// WireVersion is the encoding version of messages on the bus.
const WireVersion = 1

// ErrMalformed is returned for a message that cannot be decoded.
var ErrMalformed = errors.New("scheduler: malformed message")

type wire struct {
	V   int             `json:"v"`
	Msg json.RawMessage `json:"m"`
}

// Encode returns the wire form of m.
func Encode(m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.Type, err)
	}
	// What json.Marshal(wire{...}) writes, without compacting the body
	// again (json.Marshal's output is compact already).
	out := make([]byte, 0, len(body)+16)
	out = append(out, `{"v":`...)
	out = strconv.AppendInt(out, WireVersion, 10)
	out = append(out, `,"m":`...)
	out = append(out, body...)
	return append(out, '}'), nil
}

// Decode parses and validates a message. It never panics; every problem
// comes back as an error wrapping ErrMalformed with the reason.
func Decode(data []byte) (Message, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if w.V != WireVersion {
		return Message{}, fmt.Errorf("%w: wire version %d, want %d", ErrMalformed, w.V, WireVersion)
	}
	var m Message
	if err := json.Unmarshal(w.Msg, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := m.validate(); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return m, nil
}

func (m *Message) validate() error {
	if _, ok := msgNames[m.Type]; !ok {
		return fmt.Errorf("unknown type %d", m.Type)
	}
	if m.From == "" {
		return errors.New("no sender")
	}
	if m.PartID == "" {
		return errors.New("no partition id")
	}
	needPart := m.Type == MsgGrow || m.Type == MsgUpdate || m.Type == MsgAbsorbed
	if needPart && m.Part == nil {
		return fmt.Errorf("%s without partition", m.Type)
	}
	if (m.Type == MsgMergeOffer || m.Type == MsgAbsorbed) && m.Other == nil {
		return fmt.Errorf("%s without the other partition", m.Type)
	}
	if m.Type == MsgSnapshot && m.Host == nil {
		return errors.New("snapshot without host")
	}
	// A snapshot is its sender's host: the leader stores it under the
	// sender (on a signed bus, the signer), never under another name.
	if m.Type == MsgSnapshot && m.Host.Name != m.From {
		return fmt.Errorf("snapshot of %q sent by %q", m.Host.Name, m.From)
	}
	// How long it has been overloaded is the host's own word, as its
	// demand is: it only makes relief of that host pay sooner.
	if m.Host != nil && m.Host.OverFor < 0 {
		return fmt.Errorf("snapshot of %q overloaded for %v", m.Host.Name, m.Host.OverFor)
	}
	for _, p := range []*Partition{m.Part, m.Other} {
		if p == nil {
			continue
		}
		if p.ID == "" || p.Initiator == "" || p.Leader == "" || len(p.Nodes) == 0 {
			return errors.New("partition without id, initiator, leader or nodes")
		}
		if p.State < Growing || p.State > Finishing {
			return fmt.Errorf("partition state %d", p.State)
		}
		// Every partition carries its initiator's event (the leader
		// solves for it and names its plan after it), and its initiator
		// and leader are members.
		if len(p.Events) == 0 {
			return fmt.Errorf("partition %s carries no event", p.ID)
		}
		if !p.has(p.Initiator) || !p.has(p.Leader) {
			return fmt.Errorf("partition %s: initiator or leader not a member", p.ID)
		}
		// The first event is the initiator's own (absorbed partitions'
		// events follow it): nobody raises an event for another host.
		for _, e := range p.Events {
			if e.Kind < Overload || e.Kind > Maintenance || e.Host == "" || e.ID == "" {
				return fmt.Errorf("partition %s: event %q of kind %d on %q", p.ID, e.ID, e.Kind, e.Host)
			}
		}
		if p.Events[0].Host != p.Initiator {
			return fmt.Errorf("partition %s: first event on %q, initiator %q", p.ID, p.Events[0].Host, p.Initiator)
		}
		if len(p.Nodes) > MaxNodes || len(p.Events) > MaxNodes || len(p.Moved) > MaxNodes {
			return fmt.Errorf("partition %s: %d nodes, %d events, %d moves: more than %d", p.ID, len(p.Nodes), len(p.Events), len(p.Moved), MaxNodes)
		}
		if len(p.Avoid) > MaxAvoid {
			return fmt.Errorf("partition %s: %d keys to avoid: more than %d", p.ID, len(p.Avoid), MaxAvoid)
		}
		if p.Replans < 0 {
			return fmt.Errorf("partition %s: %d re-plans", p.ID, p.Replans)
		}
		for _, m := range p.Moved {
			if m.Kind != LiveMigrate && m.Kind != Shelve || m.Server == "" || m.From == "" {
				return fmt.Errorf("partition %s: moved %s", p.ID, m)
			}
		}
		seen := make(map[string]bool, len(p.Nodes))
		for _, n := range p.Nodes {
			if n == "" || seen[n] {
				return fmt.Errorf("partition %s: empty or repeated node %q", p.ID, n)
			}
			seen[n] = true
		}
	}
	if m.Hops < 0 {
		return errors.New("negative hops")
	}
	if len(m.Carried) > 0 && m.Type != MsgUpdate {
		return fmt.Errorf("%s carrying profiles", m.Type)
	}
	if err := validCarried(m.Carried); err != nil {
		return err
	}
	return nil
}

// MaxNodes bounds a partition's nodes and events on the wire, whatever
// the ring; an agent bounds them by its ring too (admissible).
const MaxNodes = 1 << 16

// ringSlack is how many nodes a partition may have beyond the receiver's
// ring: members that joined (not heard yet) or died (not removed yet).
const ringSlack = 2

// admissible checks m against what this agent knows of the ring ("" when
// it may be stepped): a partition cannot have more nodes than the ring
// (plus ringSlack), and its leader must be a live member or the sender
// (a restarted agent speaks before its heartbeat is heard), so a request
// naming hundreds of nodes or a leader nobody runs is dropped at once
// instead of being broadcast to and waited for.
func (a *Agent) admissible(m Message) string {
	for _, p := range []*Partition{m.Part, m.Other} {
		if p == nil {
			continue
		}
		if len(p.Nodes) > len(a.ring)+ringSlack {
			return fmt.Sprintf("partition %s has %d nodes, the ring %d", p.ID, len(p.Nodes), len(a.ring))
		}
		if _, ok := slices.BinarySearch(a.ring, p.Leader); !ok && p.Leader != m.From {
			return fmt.Sprintf("partition %s: leader %q is not a live member", p.ID, p.Leader)
		}
	}
	return ""
}
