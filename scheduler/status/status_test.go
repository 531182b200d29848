package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/testbus"

	"github.com/dvms-project/dvms/bus"
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
