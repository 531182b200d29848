package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/rs/zerolog"
)

// An approve or reject names a plan and nothing else, other commands name
// none; a signed decision verifies as any command does, and is never
// taken from a peer's state (it is not a register: a replayed approval
// must not reach the agents that missed it days later) nor merged.
func TestPlanDecisions(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		cmd Command
		ok  bool
	}{
		{Command{V: 1, ID: "a", At: at, Op: OpApprove, Plan: "ev-1"}, true},
		{Command{V: 1, ID: "a", At: at, Op: OpReject, Plan: "ev-1"}, true},
		{Command{V: 1, ID: "a", At: at, Op: OpApprove}, false},
		{Command{V: 1, ID: "a", At: at, Op: OpApprove, Plan: "ev-1", Host: "c1"}, false},
		{Command{V: 1, ID: "a", At: at, Op: OpPause, Plan: "ev-1"}, false},
	} {
		if err := c.cmd.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate %v, want ok %v", c.cmd, err, c.ok)
		}
	}

	op, ring := operator(t, "alice")
	s := &Service{Region: "r", Host: "c1", Secure: true, Ring: ring, Window: 30 * time.Second, Now: func() time.Time { return at },
		Registers: NewRegisters(false), Log: zerolog.Nop(), DropLog: zerolog.Nop(), Apply: func() {}}
	payload, _ := json.Marshal(Command{V: 1, ID: "x", At: at, Op: OpApprove, Plan: "ev-1", Reply: "_INBOX.test"})
	raw := op.Seal(bus.ControlSubject("r"), payload, at)
	r, why := s.open(raw, true)
	if why != "" || r.by != "alice" || r.cmd.Plan != "ev-1" {
		t.Fatalf("signed approval: %q %+v", why, r)
	}
	if s.takeState(state{V: 1, From: "c2", Records: [][]byte{raw}}) || len(s.Registers.raws()) != 0 {
		t.Error("an approval passed on by a peer was taken")
	}
	var got []string
	s.Plans = func(cmd Command, by string, answer func(Ack)) {
		got = append(got, cmd.Op+" "+cmd.Plan+" by "+by)
		answer(Ack{Accepted: true, Plan: cmd.Plan})
	}
	tr := testbus.Connect(t, t.Context(), testbus.Server(t), "test")
	acks := make(chan Ack, 1)
	if _, err := tr.Subscribe("_INBOX.test", func(_ string, data []byte) {
		var a Ack
		_ = json.Unmarshal(data, &a)
		acks <- a
	}); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tr.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	s.Bus = tr
	s.Members = func() []string { return nil }
	s.command(t.Context(), raw)
	if strings.Join(got, ";") != "approve ev-1 by alice" || len(s.Registers.raws()) != 0 {
		t.Errorf("approval handed to Plans: %q, registers %d", got, len(s.Registers.raws()))
	}
	select {
	case a := <-acks:
		if !a.Accepted || a.Plan != "ev-1" || a.ID != "x" || a.Host != "c1" {
			t.Errorf("answer %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Error("no answer on the sender's inbox")
	}
}
