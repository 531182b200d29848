package consensus

import (
	"testing"
	"time"
)

// The merge order is strict: two partitions with the same initiator (one
// host's old and new attempt) never absorb each other, either way.
func TestMergeOrderIsStrict(t *testing.T) {
	f := NewFSM()
	now := time.Unix(1_700_000_000, 0)
	for _, id := range []string{"p", "q"} {
		reg := Registration{ID: id, Version: 1, Initiator: "h5", Nodes: []string{id}, Lease: time.Minute}
		if d := f.Apply(Command{Op: OpRegister, Time: now, Reg: reg}); !d.Committed {
			t.Fatalf("register %s: %+v", id, d)
		}
	}
	for _, pq := range [][2]string{{"p", "q"}, {"q", "p"}} {
		d := f.Apply(Command{Op: OpMerge, Time: now, P: Ref{ID: pq[0], Version: 1}, Q: Ref{ID: pq[1], Version: 1}})
		if d.Committed {
			t.Fatalf("%s absorbed into %s with the same initiator", pq[0], pq[1])
		}
	}
}
