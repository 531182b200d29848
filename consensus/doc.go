// Package consensus decides partition merges (DESIGN §5.4): the Arbiter
// interface the DVMS agent runtime calls, the merge rules as a
// deterministic state machine (FSM) shared by every implementation, a
// single-process arbiter (Local) and the Raft-replicated one: RaftNode
// and RaftGroup inside one process, and Service, the region's standing
// group whose voters are agents (hashicorp/raft over TCP, voters chosen
// by SelectVoters from live membership, requests forwarded to the leader
// over the bus).
//
// It knows partitions only as records (id, version, initiator, nodes,
// lease) and agents only as Peers (host, site, raft address); it must
// not import scheduler or nova. It uses bus only as a Transport that
// carries bytes.
package consensus
