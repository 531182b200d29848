package agentd

import (
	"context"
	"slices"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Arbiter is the merge arbiter as an agent runs it.
type Arbiter interface {
	consensus.Arbiter
	// RaftAddr is advertised in heartbeats ("" = not a voter candidate).
	RaftAddr() string
	// SetPeers follows membership.
	SetPeers([]consensus.Peer)
	// Run serves until ctx ends; the agent stops it after its runner.
	Run(ctx context.Context) error
}

// Shared is an arbiter the agent does not run: a single-process
// consensus.Local ([consensus] arbiter = local, one agent alone) or the
// simulator's in-process group, shared by every agent of the process.
type Shared struct{ consensus.Arbiter }

// RaftAddr implements Arbiter: no raft node of its own.
func (Shared) RaftAddr() string { return "" }

// SetPeers implements Arbiter: membership is not its business.
func (Shared) SetPeers([]consensus.Peer) {}

// Run implements Arbiter: nothing to run.
func (Shared) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// arbiterStatus reads what arb knows of its group (nil: it cannot say).
func arbiterStatus(arb Arbiter) *status.ArbiterInfo {
	switch a := arb.(type) {
	case interface {
		Status() consensus.ServiceStatus
	}:
		st := a.Status()
		return &status.ArbiterInfo{Kind: "raft", Voter: st.Voter, Leader: st.Leader, Voters: slices.Clone(st.Voters), Term: st.Term}
	case Shared:
		if _, ok := a.Arbiter.(*consensus.Local); ok {
			return &status.ArbiterInfo{Kind: "local"}
		}
	}
	return nil
}
