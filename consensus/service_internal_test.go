package consensus

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A request retried (lost answer, new leader, duplicated message) carries
// the same id: the log may hold it twice, the state machine applies it
// once and answers both with the first decision.
func TestRequestIDAppliedOnce(t *testing.T) {
	g, err := StartInProcessGroup(3, func() time.Time { return time.Unix(1_700_000_000, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	ctx := context.Background()
	l, err := g.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Registration{
		{ID: "p", Version: 1, Initiator: "h9", Nodes: []string{"h9"}, Lease: time.Minute},
		{ID: "q", Version: 1, Initiator: "h1", Nodes: []string{"h1"}, Lease: time.Minute},
	} {
		if d, err := l.Register(ctx, r); err != nil || !d.Committed {
			t.Fatalf("register: %+v %v", d, err)
		}
	}
	merge := raftEntry{Command: Command{Op: OpMerge, P: Ref{ID: "p", Version: 1}, Q: Ref{ID: "q", Version: 1}}, Req: "req-1"}
	first, err := l.applyEntry(ctx, merge)
	if err != nil || !first.Committed || first.Version != 2 {
		t.Fatalf("merge: %+v %v", first, err)
	}
	again, err := l.applyEntry(ctx, merge)
	if err != nil || !again.Committed || again.Version != 2 {
		t.Fatalf("retried merge answered %+v %v, want the first decision", again, err)
	}
	q, _, _ := l.Get(ctx, "q")
	if q.Version != 2 {
		t.Fatalf("q at version %d after one merge applied twice, want 2", q.Version)
	}
	// Without the id, the same command is a new request: refused as stale.
	merge.Req = ""
	if d, _ := l.applyEntry(ctx, merge); d.Committed {
		t.Fatalf("untagged repeat committed: %+v", d)
	}
	// The table survives a snapshot and restore.
	snap, err := l.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	f := newRaftFSM(nil)
	var s fsmSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	f.fsm.Restore(s.Now, s.Records)
	f.seen = s.Seen
	if got, ok := f.seen["req-1"]; !ok || got.Decision.Version != 2 {
		t.Fatalf("dedup table after snapshot: %+v %v", got, ok)
	}
}

// Whatever arrives on the request subject, decoding never panics and a
// request it accepts has every field its kind needs.
func FuzzDecodeReq(f *testing.F) {
	const region = "r1"
	reply := ReplySubject(region) + ".h1.abc"
	for _, s := range []string{
		``, `null`, `{}`, `not json`, `{"v":1}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"register","reg":{"ID":"p","Version":1,"Initiator":"h1","Nodes":["h1"],"Lease":1000}}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"merge","p":{"ID":"p","Version":1},"q":{"ID":"q","Version":1}}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"dissolve","p":{"ID":"p","Version":1}}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"get","key":"p"}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"status","state":{"id":"h1","running":true,"member":true}}`,
		`{"v":1,"id":"a","from":"h1","reply":"` + reply + `","kind":"merge","p":null,"q":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeReq(data, region)
		if err != nil {
			return
		}
		switch r.Kind {
		case kindRegister:
			_ = r.Reg.ID
		case kindMerge:
			_, _ = r.P.ID, r.Q.ID
		case kindDissolve:
			_ = r.P.ID
		case kindGet:
			if r.Key == "" {
				t.Fatal("get without a key accepted")
			}
		case kindStatus:
			_ = r.State.ID
		default:
			t.Fatalf("kind %q accepted", r.Kind)
		}
		if _, err := decodeReply(data); err != nil && r.ID == "" {
			t.Fatal("request without id accepted")
		}
	})
}
