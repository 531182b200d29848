package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Config configures one agent. Durations are in agent time (what Tick
// and Observe carry).
type Config struct {
	// ID is the agent's host name.
	ID string
	// Incarnation makes event and partition ids unique across restarts
	// (the runtime draws it at start).
	Incarnation string
	Thresholds  Thresholds
	// Underload enables UNDERLOAD events (consolidation).
	Underload bool
	// K of the last N samples must hold for OVERLOAD/UNDERLOAD to fire.
	K, N int
	// PartitionTimeout: a member that hears nothing from its leader for
	// this long dissolves the partition (DESIGN §5.6).
	PartitionTimeout time.Duration
	// SnapshotTimeout: members that have not sent their snapshot by then
	// are dropped from the partition.
	SnapshotTimeout time.Duration
	// ProgressTimeout: a leader whose request neither found a node nor
	// came back for this long dissolves (the request was lost).
	ProgressTimeout time.Duration
	// RetryBackoff and MaxRetryBackoff space retries of an event whose
	// partition did not solve it.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// Lease of a Blocked partition's registration with the arbiter.
	Lease time.Duration
	// Preempt enables shelving lowest-priority servers (DESIGN §6).
	Preempt bool
	Limits  Limits
	// SolveTimeout is the solver's hard time limit.
	SolveTimeout time.Duration
}

// DefaultConfig returns DESIGN's defaults for host id.
func DefaultConfig(id string) Config {
	return Config{
		ID: id, Thresholds: DefaultThresholds(), K: 3, N: 5,
		PartitionTimeout: 3500 * time.Millisecond, SnapshotTimeout: 1500 * time.Millisecond,
		ProgressTimeout: 5 * time.Second, RetryBackoff: 5 * time.Second, MaxRetryBackoff: 60 * time.Second,
		Lease: 10 * time.Second, Limits: DefaultLimits(), SolveTimeout: 200 * time.Millisecond,
	}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("agent id (host) is required"))
	}
	if err := c.Thresholds.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.N < 1 || c.K < 1 || c.K > c.N {
		errs = append(errs, fmt.Errorf("debounce K=%d of N=%d: need 1 <= K <= N", c.K, c.N))
	}
	for name, d := range map[string]time.Duration{
		"partition_timeout": c.PartitionTimeout, "snapshot_timeout": c.SnapshotTimeout,
		"progress_timeout": c.ProgressTimeout, "retry_backoff": c.RetryBackoff, "lease": c.Lease,
		"solve_timeout": c.SolveTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0", name))
		}
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, errors.New("max_retry_backoff must be >= retry_backoff"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Envelope is a message to send to one agent.
type Envelope struct {
	To  string
	Msg Message
}

// SolveRequest asks the runtime to run Solve and BuildPlan and to report
// with SolveDone.
type SolveRequest struct {
	PartID  string
	Version uint64
	Problem Problem
	Limits  Limits
	Timeout time.Duration
}

// ExecRequest asks the runtime to execute a plan and report with
// PlanDone. Event names the partition's event (for request ids).
type ExecRequest struct {
	PartID  string
	Version uint64
	Event   Event
	Plan    Plan
}

// ArbiterOp is a request for the merge arbiter.
type ArbiterOp uint8

const (
	ArbRegister ArbiterOp = iota + 1
	ArbMerge
	ArbDissolve
	ArbRead
)

// ArbiterRequest asks the runtime to call the arbiter and report with
// ArbiterDone. For ArbMerge, Absorb is absorbed into Part.
type ArbiterRequest struct {
	Op     ArbiterOp
	Part   Partition
	Absorb *Partition
	// Lease of a registration (ArbRegister).
	Lease time.Duration
}

// ArbiterResult is what the arbiter answered.
type ArbiterResult struct {
	Committed bool
	Reason    string
	Version   uint64
	Nodes     []string
	// Absorbed: the partition named by the request was absorbed into
	// the partition Into (a refused Register or Dissolve, or a Read).
	Absorbed bool
	Into     string
	// Unknown: the outcome is unknown (leader lost mid-apply): the agent
	// re-reads before deciding anything.
	Unknown bool
	// Err: the request could not be made (no quorum, transport).
	Err error
}

// RecordKind names what happened, for logs, metrics and tests.
type RecordKind uint8

const (
	RecEventRaised RecordKind = iota + 1
	RecEventEnded
	RecJoined
	RecBlocked
	RecPlanned
	RecNoSolution
	RecExecuting
	RecDissolved
	RecMergeProposed
	RecMergeCommitted
	RecMergeRefused
	RecDropped
)

var recNames = map[RecordKind]string{
	RecEventRaised: "event-raised", RecEventEnded: "event-ended", RecJoined: "joined",
	RecBlocked: "blocked", RecPlanned: "planned", RecNoSolution: "no-solution",
	RecExecuting: "executing", RecDissolved: "dissolved", RecMergeProposed: "merge-proposed",
	RecMergeCommitted: "merge-committed", RecMergeRefused: "merge-refused", RecDropped: "dropped",
}

func (k RecordKind) String() string { return recNames[k] }

// Record is something the agent did or decided.
type Record struct {
	Kind      RecordKind
	Event     Event
	Partition string
	Version   uint64
	Size      int
	Moves     int
	Outcome   Outcome
	Reason    string
	// Nodes of the partition, on RecBlocked and RecEventEnded records.
	Nodes []string
}

// Ready is the agent's output since the last call to Ready.
type Ready struct {
	Messages []Envelope
	Solve    []SolveRequest
	Execute  []ExecRequest
	Arbiter  []ArbiterRequest
	Records  []Record
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Messages) == 0 && len(r.Solve) == 0 && len(r.Execute) == 0 && len(r.Arbiter) == 0 && len(r.Records) == 0
}

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
	now  time.Time
	seq  uint64

	part  *Partition
	heard time.Time // member: last word from the leader; leader: last progress

	// leader state
	phase     phase
	snaps     map[string]Host
	snapSince time.Time
	merging   bool
	solved    []string // events the plan being executed solves

	// own host
	host    Host
	hasHost bool
	window  []EventKind // last N classifications
	active  *Event      // own event being handled
	backoff time.Duration
	retryAt time.Time

	ended map[string]time.Time // recently ended partitions: drop their requests
	rd    Ready

	retired bool // stopping: raises no event, joins no partition
}

// NewAgent returns a free agent. members is the initial ring.
func NewAgent(cfg Config, members []string) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.ID, err)
	}
	a := &Agent{cfg: cfg, ended: map[string]time.Time{}, backoff: cfg.RetryBackoff}
	a.SetMembers(members)
	return a, nil
}

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
func (a *Agent) SetMembers(members []string) {
	r := slices.Clone(members)
	if !slices.Contains(r, a.cfg.ID) {
		r = append(r, a.cfg.ID)
	}
	slices.Sort(r)
	a.ring = slices.Compact(r)
}

// MemberUp adds a (re)joined member to the ring.
func (a *Agent) MemberUp(id string) {
	if i, ok := slices.BinarySearch(a.ring, id); !ok {
		a.ring = slices.Insert(a.ring, i, id)
	}
}

// Members returns the ring.
func (a *Agent) Members() []string { return slices.Clone(a.ring) }

// MemberDown tells the agent a member is dead: it leaves the ring, and a
// partition that counted on it reacts (DESIGN §5.6).
func (a *Agent) MemberDown(id string) {
	if i, ok := slices.BinarySearch(a.ring, id); ok && id != a.cfg.ID {
		a.ring = slices.Delete(a.ring, i, i+1)
	}
	p := a.part
	if p == nil || !p.has(id) {
		return
	}
	switch {
	case id == p.Initiator && a.leader():
		a.dissolve(Aborted, "initiator "+id+" crashed")
	case id == p.Leader:
		a.dissolve(Aborted, "leader "+id+" crashed")
	case a.leader():
		a.removeMember(id, "crashed")
	}
}

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

// ---- inputs ----

// Tick advances time: timeouts, heartbeats and retries.
func (a *Agent) Tick(now time.Time) {
	a.now = now
	for id, t := range a.ended {
		if now.Sub(t) > 4*a.cfg.PartitionTimeout {
			delete(a.ended, id)
		}
	}
	if p := a.part; p != nil {
		if a.leader() {
			a.broadcast(Message{Type: MsgHeartbeat, PartID: p.ID, Version: p.Version})
			switch {
			case a.phase == phCollecting && now.Sub(a.snapSince) > a.cfg.SnapshotTimeout:
				a.snapshotTimeout()
			case a.phase == phWaiting && !a.merging && now.Sub(a.heard) > a.cfg.ProgressTimeout:
				a.dissolve(Aborted, "request lost: no progress")
			}
		} else if now.Sub(a.heard) > a.cfg.PartitionTimeout {
			a.dissolve(Aborted, "partition timeout: no word from leader "+p.Leader)
		}
	}
	a.maybeStart()
}

// Observe feeds one monitor sample of the agent's own host.
func (a *Agent) Observe(now time.Time, h Host) {
	a.now = now
	a.host, a.hasHost = h, true
	k := NoEvent
	switch {
	case h.Draining && len(movable(h.Servers)) > 0:
		k = Maintenance
	case a.cfg.Thresholds.Overloaded(&h):
		k = Overload
	case a.cfg.Underload && a.cfg.Thresholds.Underloaded(&h):
		k = Underload
	}
	a.window = append(a.window, k)
	if len(a.window) > a.cfg.N {
		a.window = a.window[len(a.window)-a.cfg.N:]
	}
	a.maybeStart()
}

func movable(ss []Server) []Server {
	var out []Server
	for _, s := range ss {
		if !s.Fixed {
			out = append(out, s)
		}
	}
	return out
}

// detected returns the event kind that holds K of the last N samples.
// Maintenance is the operator's intent: one sample is enough.
func (a *Agent) detected() EventKind {
	if n := len(a.window); n > 0 && a.window[n-1] == Maintenance {
		return Maintenance
	}
	count := map[EventKind]int{}
	for _, k := range a.window {
		count[k]++
	}
	for _, k := range []EventKind{Overload, Underload} {
		if count[k] >= a.cfg.K {
			return k
		}
	}
	return NoEvent
}

// maybeStart raises the agent's event and starts a partition when it is
// free, has an event and is not backing off.
func (a *Agent) maybeStart() {
	if a.part != nil || a.retired || a.now.Before(a.retryAt) {
		return
	}
	k := a.detected()
	if k == NoEvent {
		return
	}
	a.seq++
	ev := Event{ID: fmt.Sprintf("ev-%s-%s-%d", a.cfg.ID, a.cfg.Incarnation, a.seq), Kind: k, Host: a.cfg.ID, Detected: a.now}
	a.active = &ev
	a.part = &Partition{
		ID: "p-" + ev.ID, Version: 1, Initiator: a.cfg.ID, Leader: a.cfg.ID,
		Nodes: []string{a.cfg.ID}, State: Growing, Events: []Event{ev},
	}
	a.record(Record{Kind: RecEventRaised, Event: ev})
	a.forward()
}

// forward sends the partition's request to the next node outside it.
func (a *Agent) forward() {
	a.phase, a.heard = phWaiting, a.now
	next, ok := a.nextOutside(a.cfg.ID, a.part)
	if !ok {
		a.tourDone(false) // no node outside the partition: a tour is trivially complete
		return
	}
	a.send(next, Message{Type: MsgGrow, PartID: a.part.ID, Version: a.part.Version, Part: a.part.clone()})
}

// nextOutside is the ring successor of from that is not in p.
func (a *Agent) nextOutside(from string, p *Partition) (string, bool) {
	n := len(a.ring)
	i, _ := slices.BinarySearch(a.ring, from)
	for k := 1; k <= n; k++ {
		c := a.ring[(i+k)%n]
		if c != from && !p.has(c) {
			return c, true
		}
	}
	return "", false
}

// ringDist is how many ring positions b lies after a (0 when equal).
// Nodes missing from the ring count from where they would be inserted.
func (a *Agent) ringDist(from, to string) int {
	n := len(a.ring)
	i, _ := slices.BinarySearch(a.ring, from)
	j, _ := slices.BinarySearch(a.ring, to)
	return ((j-i)%n + n) % n
}

// Step handles one message.
func (a *Agent) Step(m Message) {
	switch m.Type {
	case MsgGrow:
		a.onGrow(m)
	case MsgUpdate:
		a.onUpdate(m)
	case MsgHeartbeat:
		if a.part != nil && a.part.ID == m.PartID && m.From == a.part.Leader && m.Version >= a.part.Version {
			a.heard = a.now
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

func (a *Agent) onGrow(m Message) {
	p := m.Part
	if _, gone := a.ended[p.ID]; gone {
		a.drop(m, "partition ended")
		return
	}
	if m.Hops > 2*len(a.ring)+2 {
		a.drop(m, "too many hops")
		return
	}
	mine := a.part
	switch {
	case mine != nil && mine.ID == p.ID:
		if p.Version < mine.Version {
			a.drop(m, "stale version")
			return
		}
		if !a.leader() {
			// A member: the request reached it through another partition.
			// The tour is complete only once it passes the leader (where it
			// started); before that it goes on past this partition, else
			// a merged partition, whose members are spread over the ring,
			// would end tours early and give up without having met the
			// other Blocked partitions.
			next, ok := a.nextOutside(a.cfg.ID, mine)
			if !ok || a.ringDist(a.cfg.ID, mine.Leader) < a.ringDist(a.cfg.ID, next) {
				a.send(mine.Leader, m) // back home: the leader decides
				return
			}
			m.Hops++
			m.From = a.cfg.ID
			a.rd.Messages = append(a.rd.Messages, Envelope{To: next, Msg: m})
			return
		}
		if a.phase == phWaiting && !a.merging {
			a.tourDone(m.Met)
		}
	case mine == nil && !a.host.Draining && !a.retired:
		a.join(p)
	default:
		// First out: skip this busy partition in one hop (DESIGN §5.2.4).
		if mine != nil && mine.State == Blocked && p.State == Blocked && mine.Initiator != p.Initiator {
			if mine.Initiator < p.Initiator {
				a.send(mine.Leader, Message{Type: MsgMergeOffer, PartID: mine.ID, Version: mine.Version, Other: p.clone()})
			} else {
				a.send(p.Leader, Message{Type: MsgMergeOffer, PartID: p.ID, Version: p.Version, Other: mine.clone()})
			}
			m.Met = true
		}
		skip := mine
		if skip == nil {
			skip = &Partition{}
		}
		next, ok := a.nextOutside(a.cfg.ID, skip)
		if !ok {
			a.drop(m, "no node outside")
			return
		}
		m.Hops++
		m.From = a.cfg.ID
		a.rd.Messages = append(a.rd.Messages, Envelope{To: next, Msg: m})
	}
}

// join makes this free agent the newest member and leader of p.
func (a *Agent) join(p *Partition) {
	np := p.clone()
	np.Nodes = append(np.Nodes, a.cfg.ID)
	np.Leader, np.State, np.Tours = a.cfg.ID, Growing, 0
	np.Version++
	a.part = np
	a.record(Record{Kind: RecJoined})
	a.broadcast(a.update())
	a.collect()
}

// collect starts gathering snapshots (leader).
func (a *Agent) collect() {
	a.phase, a.snapSince, a.heard = phCollecting, a.now, a.now
	a.snaps = map[string]Host{a.cfg.ID: a.snapshot()}
	a.maybeSolve()
}

func (a *Agent) snapshot() Host {
	if !a.hasHost {
		return Host{Name: a.cfg.ID, Disabled: true} // unknown: never a destination
	}
	return a.host
}

func (a *Agent) onUpdate(m Message) {
	p := m.Part
	mine := a.part
	switch {
	case mine == nil || mine.ID != p.ID:
		if p.has(a.cfg.ID) {
			a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "not a member"})
		}
	case p.Version < mine.Version:
		a.drop(m, "stale version")
	case p.Version == mine.Version && p.Leader != mine.Leader:
		a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "conflicting leader"})
	case !p.has(a.cfg.ID):
		a.leave() // removed by the leader
	default:
		if a.leader() && p.Leader != a.cfg.ID {
			a.phase = phNone // leadership moved on
		}
		a.part, a.heard = p.clone(), a.now
		// Growing: the new leader collects. Blocked: a leader with
		// preemption on collects again (tourDone); otherwise the snapshot
		// is ignored, one message per member per blocking.
		if (p.State == Growing || p.State == Blocked) && p.Leader != a.cfg.ID {
			a.send(p.Leader, Message{Type: MsgSnapshot, PartID: p.ID, Version: p.Version, Host: ptr(a.snapshot())})
		}
	}
}

func ptr[T any](v T) *T { return &v }

func (a *Agent) onSnapshot(m Message) {
	if !a.leader() || a.phase != phCollecting || m.PartID != a.part.ID || m.Version != a.part.Version || !a.part.has(m.From) {
		return
	}
	a.snaps[m.From] = *m.Host
	a.maybeSolve()
}

func (a *Agent) maybeSolve() {
	for _, n := range a.part.Nodes {
		if _, ok := a.snaps[n]; !ok {
			return
		}
	}
	hosts := make([]Host, 0, len(a.part.Nodes))
	for _, n := range a.part.Nodes {
		hosts = append(hosts, a.snaps[n])
	}
	a.phase = phSolving
	a.rd.Solve = append(a.rd.Solve, SolveRequest{
		PartID: a.part.ID, Version: a.part.Version, Limits: a.cfg.Limits, Timeout: a.cfg.SolveTimeout,
		// Preemption is the last resort: only once the partition cannot
		// grow (Blocked after a full tour, or the whole ring).
		Problem: Problem{Events: slices.Clone(a.part.Events), Hosts: hosts, Thresholds: a.cfg.Thresholds,
			Preempt: a.cfg.Preempt && (a.part.State == Blocked || len(a.part.Nodes) >= len(a.ring))},
	})
}

func (a *Agent) snapshotTimeout() {
	var missing []string
	for _, n := range a.part.Nodes {
		if _, ok := a.snaps[n]; !ok {
			missing = append(missing, n)
		}
	}
	for _, n := range missing {
		if a.part == nil {
			return
		}
		a.removeMember(n, "no snapshot in time")
	}
}

// removeMember drops a member (leader only); losing the initiator ends
// the partition, since the event was its.
func (a *Agent) removeMember(id, why string) {
	p := a.part
	if id == p.Initiator {
		a.dissolve(Aborted, "initiator "+id+" "+why)
		return
	}
	p.Nodes = slices.DeleteFunc(p.Nodes, func(n string) bool { return n == id })
	p.Version++
	a.broadcast(a.update())
	a.record(Record{Kind: RecDropped, Reason: "member " + id + " removed: " + why})
	if a.phase == phCollecting {
		a.snapSince = a.now
		a.maybeSolve()
	} else if a.phase == phSolving {
		a.collect() // the pending solution is for the old version
	}
}

// SolveDone reports the solver's result for a SolveRequest; plan is the
// ordered plan (BuildPlan) when sol.OK, planErr why none could be built.
func (a *Agent) SolveDone(partID string, version uint64, sol Solution, plan Plan, planErr error) {
	if !a.leader() || a.part.ID != partID || a.part.Version != version || a.phase != phSolving {
		return
	}
	p := a.part
	switch {
	case sol.OK && planErr == nil && plan.Len() == 0:
		a.solved = sol.Solved
		a.record(Record{Kind: RecPlanned, Event: p.Events[0], Reason: sol.Reason})
		a.dissolve(Solved, "nothing to do")
	case sol.OK && planErr == nil:
		a.solved = sol.Solved
		p.State = Finishing
		p.Version++
		a.phase = phExecuting
		a.broadcast(a.update())
		a.record(Record{Kind: RecPlanned, Event: p.Events[0], Moves: plan.Len(), Reason: sol.Reason})
		a.rd.Execute = append(a.rd.Execute, ExecRequest{PartID: p.ID, Version: p.Version, Event: p.Events[0], Plan: plan})
	default:
		reason := sol.Reason
		if planErr != nil {
			reason = planErr.Error()
		}
		a.record(Record{Kind: RecNoSolution, Event: p.Events[0], Reason: reason})
		a.forward()
	}
}

// PlanDone reports the execution of a plan: Solved when every action was
// done, Failed when one failed, Aborted when re-checks skipped actions
// (the world changed: the event is raised again if it still holds).
func (a *Agent) PlanDone(partID string, version uint64, o Outcome, reason string) {
	if !a.leader() || a.part.ID != partID || a.part.Version != version || a.phase != phExecuting {
		return
	}
	a.dissolve(o, reason)
}

// maxTours bounds the tours of a Blocked partition that keeps meeting
// other Blocked partitions without a merge committing.
const maxTours = 6

// tourDone: the request came back without finding a free node. A second
// tour ends the partition (Unsolvable) unless the request met another
// Blocked partition on its way (met): a merge was offered and may still
// commit, so giving up now would lose an event the union of the two could
// solve; it tours again, up to maxTours.
func (a *Agent) tourDone(met bool) {
	p := a.part
	p.Tours++
	if p.Tours >= 2 && (!met || p.Tours >= maxTours) {
		a.dissolve(Unsolvable, fmt.Sprintf("no solution after %d full tours", p.Tours))
		return
	}
	if p.State == Blocked {
		// Still blocked: refresh the registration and tour again.
		a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRegister, Part: *p.clone(), Lease: a.cfg.Lease})
		a.forward()
		return
	}
	p.State = Blocked
	p.Version++
	a.broadcast(a.update())
	a.record(Record{Kind: RecBlocked, Nodes: slices.Clone(p.Nodes)})
	a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRegister, Part: *p.clone(), Lease: a.cfg.Lease})
	if a.cfg.Preempt {
		// The partition cannot grow: solve once more, preemption allowed
		// now; without a solution the request tours again (SolveDone).
		a.collect()
		return
	}
	a.forward()
}

func (a *Agent) onMergeOffer(m Message) {
	p, o := a.part, m.Other
	if !a.leader() || p.ID != m.PartID || p.State != Blocked || a.merging || a.phase != phWaiting {
		return
	}
	if !(o.Initiator > p.Initiator) {
		return
	}
	a.merging = true
	a.record(Record{Kind: RecMergeProposed, Reason: "absorb " + o.ID})
	a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbMerge, Part: *p.clone(), Absorb: o.clone()})
}

// ArbiterDone reports the arbiter's answer to a request.
func (a *Agent) ArbiterDone(req ArbiterRequest, res ArbiterResult) {
	switch req.Op {
	case ArbMerge:
		if !a.leader() || a.part.ID != req.Part.ID || !a.merging {
			return
		}
		switch {
		case res.Unknown:
			// Re-read before deciding: the merge may have committed.
			a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRead, Part: req.Part, Absorb: req.Absorb})
		case res.Committed:
			a.merged(req, res)
		default:
			a.merging = false
			why := res.Reason
			if res.Err != nil {
				why = res.Err.Error()
			}
			a.record(Record{Kind: RecMergeRefused, Reason: why})
		}
	case ArbRead:
		if !a.leader() || a.part.ID != req.Part.ID || !a.merging {
			return
		}
		if res.Committed && res.Version == req.Part.Version+1 && slices.Contains(res.Nodes, req.Absorb.Nodes[0]) {
			a.merged(req, res)
			return
		}
		a.merging = false
		a.record(Record{Kind: RecMergeRefused, Reason: "outcome unknown; re-read shows no merge"})
	}
}

// merged applies a committed merge: the absorbed partition's nodes join.
func (a *Agent) merged(req ArbiterRequest, res ArbiterResult) {
	p, o := a.part, req.Absorb
	a.merging = false
	old := slices.Clone(p.Nodes)
	for _, n := range res.Nodes {
		if !p.has(n) {
			p.Nodes = append(p.Nodes, n)
		}
	}
	// Skip one version: our own request from before the merge may still
	// travel at the old version, and a free node joining it would claim
	// old+1. At old+2 members treat that fork as stale.
	p.Version = max(res.Version, p.Version+1) + 1
	p.State, p.Tours = Growing, 0
	p.Events = append(p.Events, o.Events...)
	a.record(Record{Kind: RecMergeCommitted, Reason: "absorbed " + o.ID})
	for _, n := range o.Nodes {
		if n != a.cfg.ID {
			a.send(n, Message{Type: MsgAbsorbed, PartID: p.ID, Version: p.Version, Part: p.clone(), Other: o.clone()})
		}
	}
	for _, n := range old {
		if n != a.cfg.ID {
			a.send(n, a.update())
		}
	}
	a.collect()
}

func (a *Agent) onAbsorbed(m Message) {
	o := m.Other
	mine := a.part
	if mine == nil || mine.ID != o.ID || mine.Version != o.Version {
		a.send(m.From, Message{Type: MsgNack, PartID: m.PartID, Version: m.Version, Reason: "not in the absorbed partition version"})
		return
	}
	a.ended[mine.ID] = a.now
	a.phase, a.merging = phNone, false
	a.part, a.heard = m.Part.clone(), a.now
	a.send(a.part.Leader, Message{Type: MsgSnapshot, PartID: a.part.ID, Version: a.part.Version, Host: ptr(a.snapshot())})
}

func (a *Agent) onDissolve(m Message) {
	p := a.part
	if p == nil || p.ID != m.PartID {
		return
	}
	if m.Version < p.Version && m.From != p.Leader {
		a.drop(m, "stale dissolution")
		return
	}
	if a.leader() && a.phase == phExecuting {
		// A member gave up on us, but our plan is running: the partition
		// lives until the executor reports, so its outcome is recorded.
		// The executor's re-checks protect hosts that left.
		a.drop(m, "dissolution while executing")
		return
	}
	a.end(m.Outcome, m.Reason, m.Solved)
}

// dissolve ends the partition for every member.
func (a *Agent) dissolve(o Outcome, reason string) {
	p := a.part
	var solved []string
	if o == Solved {
		solved = a.solved
	}
	a.broadcast(Message{Type: MsgDissolve, PartID: p.ID, Version: p.Version, Outcome: o, Reason: reason, Solved: solved})
	if a.leader() && (p.State == Blocked || p.Tours > 0) {
		a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbDissolve, Part: *p.clone()})
	}
	a.end(o, reason, solved)
}

// end frees this agent and settles its own event if the partition
// carried it. A Solved partition solved only the events in solved (a
// merged partition may solve its initiator's event but not all).
func (a *Agent) end(o Outcome, reason string, solved []string) {
	p := a.part
	a.record(Record{Kind: RecDissolved, Outcome: o, Reason: reason})
	a.ended[p.ID] = a.now
	a.part, a.phase, a.merging, a.snaps, a.solved = nil, phNone, false, nil, nil
	if a.active == nil {
		return
	}
	ev := *a.active
	carried := slices.ContainsFunc(p.Events, func(e Event) bool { return e.ID == ev.ID })
	if !carried {
		return // our event waits for us to be free
	}
	retryNow := false
	if o == Solved && !slices.Contains(solved, ev.ID) {
		// A merged partition's plan solved other events of the union
		// first (the solver's tiers): nothing says this one has no
		// solution. It ends Aborted and is raised again at once, against
		// the cloud as the plan left it.
		o, reason, retryNow = Aborted, "the merged partition's plan solved other events: raised again", true
	}
	a.active = nil
	a.window = a.window[:0] // fresh samples before the next event
	a.record(Record{Kind: RecEventEnded, Event: ev, Partition: p.ID, Version: p.Version, Size: len(p.Nodes), Outcome: o, Reason: reason, Nodes: slices.Clone(p.Nodes)})
	if o == Solved {
		a.backoff, a.retryAt = a.cfg.RetryBackoff, time.Time{}
		return
	}
	if retryNow {
		a.retryAt = a.now
		return
	}
	a.retryAt = a.now.Add(a.backoff)
	a.backoff = min(2*a.backoff, a.cfg.MaxRetryBackoff)
}

// Retire prepares the agent to stop (SIGTERM): from now on it raises no
// event and joins no partition (requests are forwarded as by a busy
// agent). A partition it leads is dissolved at once unless its plan is
// being executed: the runtime lets that plan finish and PlanDone ends the
// partition as usual. A member that does not lead stays until its
// partition ends (dissolve message or partition timeout), so the event it
// may carry is recorded as ended. Retire reports whether the agent must
// keep running for that (the runtime bounds the wait).
func (a *Agent) Retire(now time.Time) (busy bool) {
	a.now, a.retired = now, true
	switch {
	case a.part == nil:
		return false
	case !a.leader() || a.phase == phExecuting:
		return true
	}
	a.dissolve(Aborted, "leader "+a.cfg.ID+" is stopping")
	return false
}

// Retired reports whether Retire was called.
func (a *Agent) Retired() bool { return a.retired }

// leave frees this agent without telling anyone (it was removed).
func (a *Agent) leave() { a.end(Aborted, "removed from the partition", nil) }
