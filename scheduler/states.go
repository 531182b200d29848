package scheduler

// The agent's states (DESIGN §5): what role the agent plays in a
// partition, and the one step function per role that handles its input.
//
// An agent is in one of three roles, which follows from its partition
// (Agent.part) and nothing else; setPart is the one place it changes:
//
//	               event raised (maybeStart),
//	               request taken (growIdle: join)
//	   +------+  ----------------------------->  +--------+
//	   | idle |                                  | leader |
//	   +------+  <-----------------------------  +--------+
//	      ^       partition ended (end)              |
//	      |                                          | a node that joined leads now
//	      |                                          | (onUpdate), or absorbed into
//	      |  partition ended (end: dissolved,        | another partition (onAbsorbed)
//	      |  removed, timed out)                     v
//	      +----------------------------------  +--------+  absorbed: a member
//	                                           | member | <---+ of the absorbing
//	                                           +--------+ ----+ partition
//
// An idle agent never becomes a member directly (it joins a partition
// as its leader), nor does a member become its partition's leader.
//
// A leader's work goes through phases (leading.phase):
//
//	 raised --> waiting <-----------------------------------------+
//	              |  its request is out (forward); merging: a      |
//	              |  merge is before the arbiter (merge.go)        |
//	              |                                                |
//	              |  came back: tour done (Blocked, tours again ---+
//	              |  or takes a last look), relief given up,       |
//	              |  merge committed                               |
//	 joined -->   v                                                |
//	          collecting --- every snapshot in ---> solving -------+
//	              ^                                  |    no plan, or a plan
//	              +------- member removed -----------+    that only fits while
//	              |                                  |    relief may grow (relief.go)
//	              |                                  | plan
//	              +------- re-plan (PlanSkipped) -- executing
//
// From any phase the partition may end (dissolve: idle). A node that
// its request reaches joins and takes the lead (member).
//
// Step and Tick dispatch on the role here (stepIdle, stepMember,
// stepLeader; tickLeader); the leader's results (SolveDone, PlanDone,
// PlanSkipped, ArbiterDone) are for a leader only. A leader's own state
// (leading) exists only while it leads: its fields are read through
// Agent.lead, nil in the other roles, so which flags are valid when is
// answered by the type (states_test.go walks the protocol to check it).

import "time"

// role is the agent's part in its partition.
type role uint8

const (
	// idle: in no partition. It may raise an event (maybeStart) and take
	// a request that reaches it (join); either makes it a leader.
	idle role = iota
	// member: in a partition another agent leads. It answers updates
	// with its snapshot, relays requests of its own partition to its
	// leader, and waits for its leader's word (memberTimeout).
	member
	// leader: leads its partition (leading holds what only it needs).
	leader
)

func (r role) String() string {
	switch r {
	case idle:
		return "idle"
	case member:
		return "member"
	}
	return "leader"
}

// phase is a leader's sub-state (leading.phase).
type phase uint8

const (
	phNone       phase = iota
	phWaiting          // request in flight, waiting for a node (growing, touring)
	phCollecting       // gathering snapshots
	phSolving          // solver running
	phExecuting        // plan running
)

// leading is what only a leader holds. It exists from the moment the
// agent leads (setPart) until it stops leading: every field starts from
// its zero value with each leadership.
type leading struct {
	phase phase
	// progress is when the partition last moved on: the request sent,
	// snapshots asked for (a request lost is given up after
	// requestTimeout).
	progress time.Time

	// phCollecting: the members' snapshots so far, since when, and
	// whether the missing ones were asked for again (askMissing).
	snaps     map[string]Host
	snapSince time.Time
	snapAsked bool

	// phWaiting, Blocked (merge.go). merging: a merge is before the
	// arbiter. back: the leader's own request came back meanwhile
	// (backMet: it met another Blocked partition); the tour is finished
	// once the merge is refused (tourDone). offered: a Blocked partition
	// that may absorb this one met it since its last tour (a merge may
	// still commit): the tour counts as met.
	merging, back, backMet bool
	offered                bool

	// lastLook: the partition's tours are over and it solves once more
	// on fresh snapshots before giving up (tourDone); no solution then
	// ends it Unsolvable (SolveDone).
	lastLook bool

	// relief: growth for relief headroom (relief.go).
	relief reliefState

	// solved: the events the plan being executed solves.
	solved []string
}

// role is the agent's role now.
func (a *Agent) role() role {
	switch {
	case a.part == nil:
		return idle
	case a.lead != nil:
		return leader
	}
	return member
}

// leader reports whether the agent leads its partition.
func (a *Agent) leader() bool { return a.lead != nil }

// setPart makes p the agent's partition (nil: none) and its role follow:
// leader when p names this agent leader, member when p names another,
// idle without p. A leader that goes on leading the same partition keeps
// its leading; any other leadership starts from a new one.
func (a *Agent) setPart(p *Partition) {
	goesOn := a.lead != nil && p != nil && a.part != nil && a.part.ID == p.ID
	a.part = p
	switch {
	case p == nil || p.Leader != a.cfg.ID:
		a.lead = nil
	case !goesOn:
		a.lead = &leading{}
	}
}

// Step handles one message: admitted against the ring, then stepped by
// the agent's role.
func (a *Agent) Step(m Message) {
	if why := a.admissible(m); why != "" {
		a.drop(m, why)
		return
	}
	switch a.role() {
	case idle:
		a.stepIdle(m)
	case member:
		a.stepMember(m)
	case leader:
		a.stepLeader(m)
	}
}

// stepIdle: a free agent takes a request (or passes it on when it may
// not join), and tells senders that take it for a member it is not one.
func (a *Agent) stepIdle(m Message) {
	switch m.Type {
	case MsgGrow:
		a.growIdle(m)
	case MsgUpdate:
		a.onUpdate(m) // a nack, if it names this agent
	case MsgHeartbeat:
		a.onHeartbeat(m) // a nack
	case MsgAbsorbed:
		a.onAbsorbed(m)
	}
	// MsgSnapshot, MsgDissolve, MsgMergeOffer, MsgNack: for a partition
	// it is not in.
}

// stepMember: a member follows its leader.
func (a *Agent) stepMember(m Message) {
	switch m.Type {
	case MsgGrow:
		a.growMember(m)
	case MsgUpdate:
		a.onUpdate(m)
	case MsgHeartbeat:
		a.onHeartbeat(m)
	case MsgDissolve:
		a.onDissolve(m)
	case MsgAbsorbed:
		a.onAbsorbed(m)
	}
	// MsgSnapshot, MsgMergeOffer, MsgNack: a leader's.
}

// stepLeader: a leader grows, collects, solves, merges and ends its
// partition; its phase says which.
func (a *Agent) stepLeader(m Message) {
	switch m.Type {
	case MsgGrow:
		a.growLeader(m)
	case MsgUpdate:
		a.onUpdate(m)
	case MsgHeartbeat:
		a.onHeartbeat(m)
	case MsgSnapshot:
		a.onSnapshot(m)
	case MsgDissolve:
		a.onDissolve(m)
	case MsgMergeOffer:
		a.onMergeOffer(m)
	case MsgAbsorbed:
		a.onAbsorbed(m)
	case MsgNack:
		if a.part.ID == m.PartID && a.part.has(m.From) {
			a.removeMember(m.From, m.Reason)
		}
	}
}

// onHeartbeat: the leader's word keeps a member bound; a heartbeat of
// another partition is answered with a nack.
func (a *Agent) onHeartbeat(m Message) {
	if a.part != nil && a.part.ID == m.PartID && m.From == a.part.Leader && m.Version >= a.part.Version {
		a.fromLeader = a.now
	} else if a.part == nil || a.part.ID != m.PartID {
		a.send(m.From, Message{Type: MsgNack, PartID: m.PartID, Version: m.Version, Reason: "not a member"})
	}
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
	switch a.role() {
	case member:
		if now.Sub(a.fromLeader) > a.memberTimeout() {
			a.dissolve(Aborted, EndTimeout, "partition timeout: no word from leader "+a.part.Leader)
		}
	case leader:
		a.tickLeader()
	}
	a.maybeStart() // idle (again, if the partition just ended): an event may start one
}

// tickLeader: heartbeats, and the timeouts of the phase the leader is in.
func (a *Agent) tickLeader() {
	p, l := a.part, a.lead
	a.broadcast(Message{Type: MsgHeartbeat, PartID: p.ID, Version: p.Version})
	switch l.phase {
	case phCollecting:
		switch {
		case a.now.Sub(l.snapSince) > a.cfg.SnapshotTimeout:
			a.snapshotTimeout()
		case !l.snapAsked && a.now.Sub(l.snapSince) > a.cfg.SnapshotTimeout/2:
			a.askMissing()
		}
	case phWaiting:
		if l.merging || a.now.Sub(l.progress) <= a.requestTimeout() {
			return
		}
		if !a.reliefRequestLost() {
			a.dissolve(Aborted, EndRequestLost, "request lost: no progress")
		}
	}
}
