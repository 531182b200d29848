package consensus

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Op is the kind of a Command.
type Op uint8

const (
	OpRegister Op = iota + 1
	OpMerge
	OpDissolve
)

// Command is one entry of the merge log. Time is stamped by the proposer
// and is the only clock the FSM knows: lease expiry is judged against the
// largest Time applied so far, so every replica decides the same.
type Command struct {
	Op   Op
	Time time.Time
	Reg  Registration // OpRegister
	P, Q Ref          // OpMerge: absorb P into Q; OpDissolve: P
}

// FSM holds the Blocked partitions and applies the merge rules. It is
// deterministic and not safe for concurrent use: callers serialize Apply.
type FSM struct {
	now     time.Time
	records map[string]*Record
}

// NewFSM returns an empty FSM.
func NewFSM() *FSM { return &FSM{records: make(map[string]*Record)} }

// Apply applies one command and returns its decision.
func (f *FSM) Apply(c Command) Decision {
	if c.Time.After(f.now) {
		f.now = c.Time
	}
	f.expire()
	switch c.Op {
	case OpRegister:
		return f.register(c.Reg)
	case OpMerge:
		return f.merge(c.P, c.Q)
	case OpDissolve:
		return f.dissolve(c.P)
	}
	return refuse("unknown operation %d", c.Op)
}

// Get returns a copy of the record of id.
func (f *FSM) Get(id string) (Record, bool) {
	r, ok := f.records[id]
	if !ok {
		return Record{}, false
	}
	c := *r
	c.Nodes = slices.Clone(r.Nodes)
	return c, true
}

// Len is the number of records held (alive or absorbed tombstones).
func (f *FSM) Len() int { return len(f.records) }

// Records returns copies of all records, sorted by id (for snapshots).
func (f *FSM) Records() []Record {
	out := make([]Record, 0, len(f.records))
	for id := range f.records {
		r, _ := f.Get(id)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Restore replaces the state (from a snapshot).
func (f *FSM) Restore(now time.Time, recs []Record) {
	f.now = now
	f.records = make(map[string]*Record, len(recs))
	for i := range recs {
		r := recs[i]
		r.Nodes = slices.Clone(r.Nodes)
		f.records[r.ID] = &r
	}
}

// Now is the entry time of the last applied command.
func (f *FSM) Now() time.Time { return f.now }

func refuse(format string, args ...any) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// expire drops records whose lease ended. Ids are never reused (a
// partition id names one initiator's one attempt), so a dropped absorbed
// record cannot be absorbed again: a merge naming it is refused as "not
// registered".
func (f *FSM) expire() {
	for id, r := range f.records {
		if !f.now.Before(r.Expires) {
			delete(f.records, id)
		}
	}
}

func (f *FSM) register(reg Registration) Decision {
	if reg.ID == "" || reg.Initiator == "" || len(reg.Nodes) == 0 || reg.Lease <= 0 {
		return refuse("invalid registration %q: id, initiator, nodes and lease are required", reg.ID)
	}
	if r, ok := f.records[reg.ID]; ok {
		if r.Absorbed {
			return refuse("partition %s already absorbed into %s", reg.ID, r.Into)
		}
		if reg.Version < r.Version {
			return refuse("stale registration of %s: version %d < %d", reg.ID, reg.Version, r.Version)
		}
	}
	rec := &Record{Registration: reg, Expires: f.now.Add(reg.Lease)}
	rec.Nodes = slices.Clone(reg.Nodes)
	f.records[reg.ID] = rec
	return Decision{Committed: true, Version: rec.Version, Nodes: slices.Clone(rec.Nodes)}
}

// mayAbsorb is DESIGN §5.4's merge order: a partition whose initiator is
// into may absorb one whose initiator is absorbed only if absorbed > into
// (a total order: Blocked partitions never wait on each other in a
// cycle). The agent proposes merges by the same rule, scheduler.MayAbsorb;
// consensus must not import scheduler, so the arbiter, which decides,
// keeps this copy: change both together.
func mayAbsorb(into, absorbed string) bool { return absorbed > into }

func (f *FSM) merge(p, q Ref) Decision {
	if p.ID == q.ID {
		return refuse("cannot merge %s into itself", p.ID)
	}
	rp, ok := f.records[p.ID]
	if !ok {
		return refuse("partition %s not registered", p.ID)
	}
	rq, ok := f.records[q.ID]
	if !ok {
		return refuse("partition %s not registered", q.ID)
	}
	switch {
	case rp.Absorbed:
		return refuse("partition %s already absorbed into %s", p.ID, rp.Into)
	case rq.Absorbed:
		return refuse("partition %s already absorbed into %s", q.ID, rq.Into)
	case rp.Version != p.Version:
		return refuse("partition %s at version %d, not %d", p.ID, rp.Version, p.Version)
	case rq.Version != q.Version:
		return refuse("partition %s at version %d, not %d", q.ID, rq.Version, q.Version)
	case !mayAbsorb(rq.Initiator, rp.Initiator):
		return refuse("initiator order: %s (%s) may not be absorbed into %s (%s)", p.ID, rp.Initiator, q.ID, rq.Initiator)
	}
	rp.Absorbed, rp.Into = true, q.ID
	rq.Version++
	for _, n := range rp.Nodes {
		if !slices.Contains(rq.Nodes, n) {
			rq.Nodes = append(rq.Nodes, n)
		}
	}
	rq.Expires = f.now.Add(rq.Lease)
	return Decision{Committed: true, Version: rq.Version, Nodes: slices.Clone(rq.Nodes)}
}

func (f *FSM) dissolve(p Ref) Decision {
	r, ok := f.records[p.ID]
	if !ok {
		return Decision{Committed: true, Reason: "not registered"}
	}
	if r.Absorbed {
		return refuse("partition %s already absorbed into %s", p.ID, r.Into)
	}
	if p.Version < r.Version {
		return refuse("stale dissolution of %s: version %d < %d", p.ID, p.Version, r.Version)
	}
	delete(f.records, p.ID)
	return Decision{Committed: true}
}
