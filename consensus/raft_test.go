package consensus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/consensus/arbitertest"
)

// newGroup starts n voters connected by raft's in-memory transport.
func newGroup(t *testing.T, n int, now func() time.Time) (*consensus.RaftGroup, []*consensus.RaftNode, []*raft.InmemTransport) {
	t.Helper()
	g, err := consensus.StartInProcessGroup(n, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Shutdown)
	return g.RaftGroup, g.Nodes, g.Transports
}

// The Raft arbiter passes the same suite as the single-process one.
func TestRaftArbiter(t *testing.T) {
	arbitertest.Run(t, func(t *testing.T) (consensus.Arbiter, arbitertest.Clock) {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		g, _, _ := newGroup(t, 3, c.Now)
		return g, c
	})
}

func reg(id, initiator string) consensus.Registration {
	return consensus.Registration{ID: id, Version: 1, Initiator: initiator, Leader: initiator, Nodes: []string{initiator}, Lease: time.Minute}
}

// A killed voter (the leader) does not stop merges: the two others elect
// a new leader and decide.
func TestRaftMergeSurvivesLeaderLoss(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g, _, _ := newGroup(t, 3, c.Now)
	for _, r := range []consensus.Registration{reg("p", "h9"), reg("q", "h1")} {
		if d, err := g.Register(ctx, r); err != nil || !d.Committed {
			t.Fatalf("register: %+v %v", d, err)
		}
	}
	start := time.Now()
	leader, err := g.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Shutdown(); err != nil {
		t.Fatal(err)
	}
	g.Remove(leader)
	d, err := g.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q", Version: 1})
	if err != nil || !d.Committed || d.Version != 2 {
		t.Fatalf("merge after leader loss: %+v %v", d, err)
	}
	t.Logf("new leader elected and merge committed %s after the leader was killed", time.Since(start).Round(time.Millisecond))
}

// With a majority gone, nothing is decided (no quorum), and nothing
// unsafe happens: the request fails, it does not commit halfway.
func TestRaftMajorityLossDecidesNothing(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g, nodes, trans := newGroup(t, 3, c.Now)
	if d, err := g.Register(ctx, reg("p", "h9")); err != nil || !d.Committed {
		t.Fatalf("register: %+v %v", d, err)
	}
	leader, _ := g.Leader(ctx)
	// Cut the leader off from both followers: it has no majority.
	for i, n := range nodes {
		if n == leader {
			trans[i].DisconnectAll()
			for j := range trans {
				if j != i {
					trans[j].Disconnect(trans[i].LocalAddr())
				}
			}
		}
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := leader.Register(short, reg("q", "h1"))
	if err == nil {
		t.Fatal("a leader without a majority committed a registration")
	}
	if !errors.Is(err, consensus.ErrNoQuorum) && !errors.Is(err, consensus.ErrUnknownOutcome) {
		t.Fatalf("err = %v, want ErrNoQuorum or ErrUnknownOutcome", err)
	}
}
