package consensus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Issue 27: an entry no leader could have written (dated 2999, far ahead
// of every member's clock) is refused: it neither moves the arbiter's
// clock nor expires the leases it holds. Entries dated by the clock are
// applied (the control).
func TestRaftFSMRefusesEntriesFromTheFuture(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	f := newRaftFSM(func() time.Time { return now })
	apply := func(e raftEntry) Decision {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return f.Apply(&raft.Log{Type: raft.LogCommand, Data: data}).(Decision)
	}
	reg := Registration{ID: "p", Version: 1, Initiator: "h1", Leader: "h1", Nodes: []string{"h1"}, Lease: time.Minute}
	if d := apply(raftEntry{Command: Command{Op: OpRegister, Time: now, Reg: reg}}); !d.Committed {
		t.Fatalf("register dated now: %+v", d)
	}
	forged := raftEntry{Command: Command{Op: OpDissolve, Time: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), P: Ref{ID: "other"}}}
	if d := apply(forged); d.Committed {
		t.Fatalf("an entry dated 2999 was applied: %+v", d)
	}
	if got := f.fsm.Now(); !got.Equal(now) {
		t.Fatalf("the arbiter's clock moved to %s", got)
	}
	if _, ok := f.fsm.Get("p"); !ok {
		t.Fatal("the registration expired under the forged clock")
	}
	// Within the bound (the members' clocks differ a little): applied.
	if d := apply(raftEntry{Command: Command{Op: OpDissolve, Time: now.Add(time.Minute), P: Ref{ID: "p", Version: 1}}}); !d.Committed {
		t.Fatalf("dissolve dated a minute ahead: %+v", d)
	}
}
