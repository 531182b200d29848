package scheduler

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := Message{Type: MsgGrow, From: "h1", PartID: "p", Version: 3, Hops: 2,
		Part: &Partition{ID: "p", Version: 3, Initiator: "h1", Leader: "h1", Nodes: []string{"h1"}, State: Blocked, Tours: 1, Events: []Event{{ID: "e", Kind: Overload, Host: "h1"}}}}
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Part.State != Blocked || got.Hops != 2 || got.Part.Tours != 1 {
		t.Fatalf("round trip %+v", got)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       "{",
		"wrong version":  `{"v":2,"m":{}}`,
		"unknown type":   `{"v":1,"m":{"Type":99,"From":"h","PartID":"p"}}`,
		"no sender":      `{"v":1,"m":{"Type":2,"PartID":"p"}}`,
		"grow no part":   `{"v":1,"m":{"Type":1,"From":"h","PartID":"p"}}`,
		"bad state":      `{"v":1,"m":{"Type":1,"From":"h","PartID":"p","Part":{"ID":"p","Initiator":"h","Leader":"h","Nodes":["h"],"State":9}}}`,
		"snapshot bare":  `{"v":1,"m":{"Type":4,"From":"h","PartID":"p"}}`,
		"no event":       `{"v":1,"m":{"Type":1,"From":"h","PartID":"p","Part":{"ID":"p","Initiator":"h","Leader":"h","Nodes":["h"],"State":1}}}`,
		"leader outside": `{"v":1,"m":{"Type":1,"From":"h","PartID":"p","Part":{"ID":"p","Initiator":"h","Leader":"x","Nodes":["h"],"State":1,"Events":[{"ID":"e","Kind":1,"Host":"h"}]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(in)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// FuzzDecode feeds sequences of wire messages (one a line) to an agent
// that has a host, answering every request it makes (solve with the real
// solver, plans done, arbiter commits) and ticking between messages:
// whatever decodes must be safe to step, in any order.
func FuzzDecode(f *testing.F) {
	enc := func(ms ...Message) []byte {
		var out []byte
		for _, m := range ms {
			b, err := Encode(m)
			if err != nil {
				f.Fatal(err)
			}
			out = append(append(out, b...), '\n')
		}
		return out
	}
	part := func(v uint64, st PartState, events ...Event) *Partition {
		return &Partition{ID: "p", Version: v, Initiator: "x", Leader: "x", Nodes: []string{"x"}, State: st, Events: events}
	}
	ev := Event{ID: "e", Kind: Overload, Host: "x"}
	xHost := &Host{Name: "x", CPUs: 4, RAMMB: 4096, AllocVCPUs: 8, AllocRAMMB: 4096,
		Servers: []Server{{ID: "s1", VCPUs: 2, RAMMB: 512, CPU: 3, RAM: 256}, {ID: "s2", VCPUs: 2, RAMMB: 512, CPU: 2, RAM: 256}}}
	f.Add(enc(Message{Type: MsgUpdate, From: "h", PartID: "p", Part: part(1, Growing, ev)}))
	f.Add([]byte(`{"v":1,"m":null}`))
	// A partition carrying no event joins, collects and solves: SolveDone
	// must not index its events.
	f.Add(enc(Message{Type: MsgGrow, From: "x", PartID: "p", Version: 1, Part: part(1, Growing)},
		Message{Type: MsgSnapshot, From: "x", PartID: "p", Version: 2, Host: xHost}))
	f.Add(enc(Message{Type: MsgGrow, From: "x", PartID: "p", Version: 1, Part: part(1, Growing, ev)},
		Message{Type: MsgSnapshot, From: "x", PartID: "p", Version: 2, Host: xHost},
		Message{Type: MsgDissolve, From: "x", PartID: "p", Version: 2, Outcome: Aborted}))
	f.Add(enc(Message{Type: MsgGrow, From: "x", PartID: "p", Version: 1, Part: part(1, Blocked, ev)},
		Message{Type: MsgMergeOffer, From: "y", PartID: "p", Version: 2, Other: &Partition{ID: "q", Version: 3, Initiator: "y", Leader: "y", Nodes: []string{"y"}, State: Blocked, Events: []Event{{ID: "f", Kind: Overload, Host: "y"}}}},
		Message{Type: MsgNack, From: "x", PartID: "p", Version: 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _ := NewAgent(DefaultConfig("h"), []string{"h", "x", "y"})
		now := t0
		a.Observe(now, Host{Name: "h", CPUs: 8, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192})
		for _, line := range bytes.Split(data, []byte("\n")) {
			msg, err := Decode(line)
			if err != nil {
				continue
			}
			a.Step(msg)
			answer(a)
			now = now.Add(700 * time.Millisecond)
			a.Tick(now)
			answer(a)
		}
	})
}

// answer serves what the agent asked for until it asks for nothing more.
func answer(a *Agent) {
	for range 20 {
		rd := a.Ready()
		if rd.Empty() {
			return
		}
		for _, req := range rd.Solve {
			sol, plan, err := SolveAndPlan(req.Problem, req.Limits, DefaultSolveOptions())
			a.SolveDone(req.PartID, req.Version, sol, plan, err)
		}
		for _, req := range rd.Execute {
			a.PlanDone(req.PartID, req.Version, Solved, EndExecuted, "done")
		}
		for _, req := range rd.Arbiter {
			nodes := slices.Clone(req.Part.Nodes)
			if req.Absorb != nil {
				nodes = append(nodes, req.Absorb.Nodes...)
			}
			a.ArbiterDone(req, ArbiterResult{Committed: true, Version: req.Part.Version + 1, Nodes: nodes})
		}
	}
}
