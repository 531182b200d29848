// Package consensus decides partition merges (DESIGN §5.4): the Arbiter
// interface the DVMS agent runtime calls, the merge rules as a
// deterministic state machine (FSM) shared by every implementation, a
// single-process arbiter (Local) and the Raft-replicated one.
//
// It knows partitions only as records (id, version, initiator, nodes,
// lease); it must not import scheduler, bus or nova.
package consensus
