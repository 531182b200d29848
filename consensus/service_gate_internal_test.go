package consensus

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A node in no group yet takes raft RPCs only from the voters membership
// selects (the leader that adds it is one), and from nobody whose header
// names someone else.
func TestAdmitRPCOutsideAGroup(t *testing.T) {
	_, tr := raft.NewInmemTransport("n1")
	n, err := NewRaftNode(DefaultRaftConfig("n1"), tr, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	selected := func(p string) error {
		if p != "h1" {
			return errors.New("not selected")
		}
		return nil
	}
	ae := func(id string) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte(id), Addr: []byte("10.0.0.1:7420")}, Term: 1 << 40}
	}
	if err := admitRPC(n, "h1", ae("h1"), selected, nil); err != nil {
		t.Errorf("a selected voter refused: %v", err)
	}
	if err := admitRPC(n, "h4", ae("h4"), selected, nil); !errors.Is(err, errRPCRefused) {
		t.Errorf("a candidate outside the selected voters taken: %v", err)
	}
	if err := admitRPC(n, "h4", ae("h1"), selected, nil); !errors.Is(err, errRPCRefused) {
		t.Errorf("h4 speaking as h1 taken: %v", err)
	}
	if err := admitRPC(n, "h1", struct{}{}, selected, nil); !errors.Is(err, errRPCRefused) {
		t.Errorf("an RPC without a header taken: %v", err)
	}
}
