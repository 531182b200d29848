package scheduler

import (
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := Message{Type: MsgGrow, From: "h1", PartID: "p", Version: 3, Hops: 2,
		Part: &Partition{ID: "p", Version: 3, Initiator: "h1", Leader: "h1", Nodes: []string{"h1"}, State: Blocked, Tours: 1}}
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
		"not json":      "{",
		"wrong version": `{"v":2,"m":{}}`,
		"unknown type":  `{"v":1,"m":{"Type":99,"From":"h","PartID":"p"}}`,
		"no sender":     `{"v":1,"m":{"Type":2,"PartID":"p"}}`,
		"grow no part":  `{"v":1,"m":{"Type":1,"From":"h","PartID":"p"}}`,
		"bad state":     `{"v":1,"m":{"Type":1,"From":"h","PartID":"p","Part":{"ID":"p","Initiator":"h","Leader":"h","Nodes":["h"],"State":9}}}`,
		"snapshot bare": `{"v":1,"m":{"Type":4,"From":"h","PartID":"p"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(in)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	m, _ := Encode(Message{Type: MsgUpdate, From: "h", PartID: "p", Part: &Partition{ID: "p", Initiator: "h", Leader: "h", Nodes: []string{"h"}, State: Growing}})
	f.Add(m)
	f.Add([]byte(`{"v":1,"m":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := Decode(data)
		if err != nil {
			return
		}
		// What decodes must be safe for an agent to step.
		a, _ := NewAgent(DefaultConfig("h"), []string{"h", "x"})
		a.Step(msg)
		a.Ready()
	})
}
