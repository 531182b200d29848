package scheduler

// What the agent asks of its runtime (Ready) and what it reports
// (Record): messages, solve / execute / arbiter requests, records.

import "time"

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
	// Moved counts the actions Nova did for the partition's earlier plans
	// (Partition.Moved, re-plans): a plan skipped because its event no
	// longer holds after those moves solved it; with none, it vanished.
	Moved int
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
	// RecDropped: a message was dropped (stale, for an ended partition,
	// too many hops).
	RecDropped
	// RecMemberRemoved: the leader removed a member (crashed, silent,
	// nacked).
	RecMemberRemoved
	// RecReplanning: re-checks skipped actions of the partition's plan
	// while its event still holds: the leader solves again on fresh
	// snapshots (Agent.PlanSkipped).
	RecReplanning
	// RecHeld: the host's condition holds but the agent raises no event
	// for it (Record.Hold says why; Event has its kind and host, no id):
	// recorded once per change (held.go).
	RecHeld
)

var recNames = map[RecordKind]string{
	RecEventRaised: "event-raised", RecEventEnded: "event-ended", RecJoined: "joined",
	RecBlocked: "blocked", RecPlanned: "planned", RecNoSolution: "no-solution",
	RecExecuting: "executing", RecDissolved: "dissolved", RecMergeProposed: "merge-proposed",
	RecMergeCommitted: "merge-committed", RecMergeRefused: "merge-refused", RecDropped: "dropped",
	RecMemberRemoved: "member-removed", RecReplanning: "replanning", RecHeld: "held",
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
	// Class sorts why the event or partition ended (RecEventEnded,
	// RecDissolved); Reason says it for people.
	Class EndClass
	// Nodes of the partition, on RecBlocked and RecEventEnded records.
	Nodes []string
	// Absorbed names the partition absorbed (RecMergeCommitted).
	Absorbed string
	// Hold: why no event is raised (RecHeld).
	Hold HoldClass
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
