package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/testbus"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
)

// An answer too big for one NATS message drops its oldest events.
func TestEncodeReportFits(t *testing.T) {
	rep := Report{V: 1, Host: "c1"}
	for i := range 300 {
		rep.Events = append(rep.Events, journal.Entry{ID: fmt.Sprint("e", i), Reason: strings.Repeat("x", 4096)})
	}
	data := Encode(rep)
	var got Report
	if err := json.Unmarshal(data, &got); err != nil || len(data) > MaxReport || got.Truncated == 0 || got.Events[len(got.Events)-1].ID != "e299" {
		t.Fatalf("%d bytes, truncated %d, err %v", len(data), got.Truncated, err)
	}
}

// The CLI stops waiting once every member any answer lists has answered,
// and waits for the timeout when one is missing.
func TestGatherReports(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(name string) *bus.NATS { return testbus.Connect(t, ctx, url, name) }
	var mu sync.Mutex
	members := []MemberInfo{{Host: "c1"}, {Host: "c2"}}
	for _, h := range []string{"c1", "c2"} {
		tr := connect(h)
		s := &Service{Region: "g", Bus: tr, Answer: func(Request) Report {
			mu.Lock()
			defer mu.Unlock()
			return Report{V: 1, Host: h, Members: slices.Clone(members)}
		}}
		go func() { _ = s.Run(ctx) }()
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := tr.Flush(fctx); err != nil {
			t.Fatal(err)
		}
		fcancel()
	}
	cli := connect("cli")
	// The services subscribe asynchronously: ask until both answered.
	var reps []Report
	start := time.Now()
	for len(reps) < 2 && time.Since(start) < 10*time.Second {
		reps, _ = Gather(ctx, cli, GatherConfig{Region: "g", Timeout: 500 * time.Millisecond})
	}
	if len(reps) != 2 || reps[0].Host != "c1" || reps[1].Host != "c2" {
		t.Fatalf("reports %+v", reps)
	}
	start = time.Now()
	reps, err := Gather(ctx, cli, GatherConfig{Region: "g", Timeout: time.Minute})
	if err != nil || len(reps) != 2 || time.Since(start) > 30*time.Second {
		t.Fatalf("all members answered, yet waited %s: %v %v", time.Since(start), reps, err)
	}
	mu.Lock()
	members = append(members, MemberInfo{Host: "c3"}) // heard, silent
	mu.Unlock()
	start = time.Now()
	reps, err = Gather(ctx, cli, GatherConfig{Region: "g", Timeout: 300 * time.Millisecond})
	if err != nil || len(reps) != 2 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("c3 silent: %v %v after %s", reps, err, time.Since(start))
	}
	if _, err := Gather(ctx, cli, GatherConfig{Region: "nobody", Timeout: 100 * time.Millisecond}); err == nil {
		t.Fatal("no agent answered, no error")
	}
}

// An operator's command goes out sealed on the region's control subject
// with the sender's inbox as its Reply; only the acks of that command are
// gathered, by host, and the wait ends once every member they list
// answered.
func TestSendControl(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := testbus.Connect(t, ctx, url, "c1")
	sub, err := agent.Subscribe(bus.ControlSubject("g"), func(_ string, data []byte) {
		raw, sealed := bytes.CutPrefix(data, []byte("sealed:"))
		var cmd control.Command
		if !sealed || json.Unmarshal(raw, &cmd) != nil || cmd.Reply == "" {
			return // not sealed, or not a command: no answer
		}
		for _, a := range []control.Ack{
			{V: 1, ID: "an-older-command", Host: "c9", Accepted: true},
			{V: 1, ID: cmd.ID, Host: "c1", Accepted: true, Members: []string{"c1"}},
		} {
			out, _ := json.Marshal(a)
			_ = agent.Publish(ctx, cmd.Reply, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	if err := agent.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	cli := testbus.Connect(t, ctx, url, "cli")
	seal := func(subject string, data []byte) []byte {
		if subject != bus.ControlSubject("g") {
			t.Errorf("sealed for subject %q", subject)
		}
		return append([]byte("sealed:"), data...)
	}
	start := time.Now()
	acks, err := SendControl(ctx, cli, time.Minute, "g", control.Command{V: 1, ID: "p1", Op: control.OpPause}, seal, nil)
	if err != nil || len(acks) != 1 || !acks["c1"].Accepted || acks["c1"].ID != "p1" {
		t.Fatalf("acks %+v, %v: want c1's of p1 only", acks, err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("every member answered, yet waited %s", waited)
	}
	if _, err := SendControl(ctx, cli, 200*time.Millisecond, "g", control.Command{V: 1, ID: "p2", Op: control.OpPause}, nil, nil); !errors.Is(err, ErrNoAgent) {
		t.Errorf("unsealed, unanswered: %v, want ErrNoAgent", err)
	}
}
