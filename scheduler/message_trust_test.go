package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Issue 10: messages are checked against who sent them and against the
// ring, not only against the schema.

func trustPart(nodes ...string) *Partition {
	return &Partition{ID: "p", Version: 1, Initiator: nodes[0], Leader: nodes[0], Nodes: nodes, State: Growing,
		Events: []Event{{ID: "e", Kind: Maintenance, Host: nodes[0]}}}
}

func TestDecodeRejectsForgedShapes(t *testing.T) {
	many := make([]string, MaxNodes+1)
	for i := range many {
		many[i] = fmt.Sprintf("n%d", i)
	}
	otherEvent := trustPart("h2", "h3")
	otherEvent.Events[0].Host = "h1" // h2's partition claiming h1's maintenance
	avoidsMany := trustPart("h1", "h2")
	avoidsMany.Avoid = many[:MaxAvoid+1]
	noKind := trustPart("h1")
	noKind.Events[0].Kind = NoEvent // the executor does not re-check kindless events
	finishing := trustPart("h1", "h2")
	finishing.State = Finishing
	carried := func(c Carried) Message {
		return Message{Type: MsgUpdate, From: "h1", PartID: "p", Part: finishing, Carried: []Carried{c}}
	}
	good := Carried{Server: "s", To: "h2", Step: 15e9, End: 100, Profile: []float64{1, 2}, PeakRAM: 512}
	long, negative, unnamed, noStep := good, good, good, good
	long.Profile = make([]float64, ProfileSteps+1)
	negative.Profile = []float64{1, -2}
	unnamed.Server = ""
	noStep.Step = 0
	for name, m := range map[string]Message{
		"event without a kind":       {Type: MsgGrow, From: "h1", PartID: "p", Part: noKind},
		"snapshot of another host":   {Type: MsgSnapshot, From: "h2", PartID: "p", Host: &Host{Name: "h1", Draining: true}},
		"overloaded for less than 0": {Type: MsgSnapshot, From: "h1", PartID: "p", Host: &Host{Name: "h1", OverFor: -time.Second}},
		"event of another host":      {Type: MsgGrow, From: "h2", PartID: "p", Part: otherEvent},
		"repeated node":              {Type: MsgGrow, From: "h1", PartID: "p", Part: trustPart("h1", "h2", "h2")},
		"empty node":                 {Type: MsgGrow, From: "h1", PartID: "p", Part: trustPart("h1", "")},
		"more than MaxNodes":         {Type: MsgGrow, From: "n0", PartID: "p", Part: trustPart(many...)},
		"avoids more than MaxAvoid":  {Type: MsgGrow, From: "h1", PartID: "p", Part: avoidsMany},
		"profile of 17 steps":        carried(long),
		"negative demand":            carried(negative),
		"profile of no server":       carried(unnamed),
		"profile without a step":     carried(noStep),
		"profile on a snapshot":      {Type: MsgSnapshot, From: "h1", PartID: "p", Host: &Host{Name: "h1"}, Carried: []Carried{good}},
	} {
		t.Run(name, func(t *testing.T) {
			data, err := Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
	// The legitimate shapes still decode.
	for name, m := range map[string]Message{
		"own snapshot": {Type: MsgSnapshot, From: "h1", PartID: "p", Host: &Host{Name: "h1"}},
		"own event":    {Type: MsgGrow, From: "h1", PartID: "p", Part: trustPart("h1", "h2")},
		"a profile":    carried(good),
	} {
		data, _ := Encode(m)
		if _, err := Decode(data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// The amplification attack: a Grow naming 400 nodes made its victim
// broadcast to all of them and drop them one version at a time. An agent
// drops a partition larger than its ring, or led by a host not in it,
// without sending anything.
func TestStepDropsPartitionsTheRingCannotHold(t *testing.T) {
	big := []string{"h1"}
	for i := range 399 {
		big = append(big, fmt.Sprintf("ghost-%03d", i))
	}
	ghostLeader := trustPart("h1", "h3")
	ghostLeader.Leader, ghostLeader.Nodes = "evil", []string{"h1", "h3", "evil"}
	for name, p := range map[string]*Partition{
		"400 nodes":    trustPart(big...),
		"ghost leader": ghostLeader,
	} {
		t.Run(name, func(t *testing.T) {
			a := newAgent(t, "h2")
			a.Observe(t0, hostWith("h2", 1))
			a.Ready()
			a.Step(Message{Type: MsgGrow, From: "h1", PartID: p.ID, Version: p.Version, Part: p})
			rd := a.Ready()
			if a.Partition() != nil || len(rd.Messages) != 0 {
				t.Fatalf("joined %+v, sent %d messages", a.Partition(), len(rd.Messages))
			}
			if d := records(rd, RecDropped); len(d) != 1 || !strings.Contains(d[0].Reason, "grow:") {
				t.Fatalf("drop records %+v", d)
			}
		})
	}
	// A partition the ring can hold is joined.
	a := newAgent(t, "h2")
	a.Observe(t0, hostWith("h2", 1))
	a.Step(Message{Type: MsgGrow, From: "h1", PartID: "p", Version: 1, Part: trustPart("h1", "h3")})
	if p := a.Partition(); p == nil || p.Leader != "h2" {
		t.Fatalf("legitimate grow not joined: %+v", p)
	}
}
