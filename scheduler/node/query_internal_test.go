package node

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/rs/zerolog"
)

// syncBus delivers every publish at once to the handler of its subject.
type syncBus struct {
	mu sync.Mutex
	to map[string]func(subject string, data []byte)
}

func (b *syncBus) Publish(_ context.Context, subject string, data []byte) error {
	b.mu.Lock()
	h := b.to[subject]
	b.mu.Unlock()
	if h != nil {
		h(subject, data)
	}
	return nil
}

func (b *syncBus) Subscribe(string, bus.Handler) (bus.Subscription, error) { return nil, nil }
func (b *syncBus) Close() error                                            { return nil }

// requestSeen is a demand source that notes the request id of each read.
type requestSeen struct {
	mu  sync.Mutex
	ids []string
}

func (s *requestSeen) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, nova.RequestID(ctx))
	return map[string]nova.Demand{"s1": {CPU: 1, RAMMB: 512}}, nil
}

// dropFirst loses the first query published on the demand subjects.
type dropFirst struct {
	*syncBus
	dropped atomic.Bool
}

func (b *dropFirst) Publish(ctx context.Context, subject string, data []byte) error {
	if strings.Contains(subject, "demand") && b.dropped.CompareAndSwap(false, true) {
		return nil
	}
	return b.syncBus.Publish(ctx, subject, data)
}

// A demand query that got no answer is sent again (the agent was late,
// or the query lost), not given up after one wait.
func TestDemandQuerySentAgain(t *testing.T) {
	b := &dropFirst{syncBus: &syncBus{to: map[string]func(string, []byte){}}}
	run := demandPeersOn(t, b.syncBus, b)
	asker := run("h1", nil)
	run("h2", &requestSeen{})
	d, err := asker.askDemand(context.Background(), "h2")
	if err != nil || d["s1"].CPU != 1 {
		t.Fatalf("demand %v, %v: want h2's answer to the second query", d, err)
	}
	if !b.dropped.Load() {
		t.Fatal("no query was lost: the test did not test anything")
	}
}

// demandPeers returns a function starting a runner for host h (h1 or h2)
// on one synchronous bus, answering demand queries from its source d.
func demandPeers(t *testing.T) func(h string, d nova.DemandSource) *Runner {
	t.Helper()
	b := &syncBus{to: map[string]func(string, []byte){}}
	return demandPeersOn(t, b, b)
}

// demandPeersOn is demandPeers with the runners publishing on via, which
// delivers through b's handlers.
func demandPeersOn(t *testing.T, b *syncBus, via bus.Transport) func(h string, d nova.DemandSource) *Runner {
	t.Helper()
	cloud := fake.New(fake.DefaultConfig(), fake.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	run := func(h string, d nova.DemandSource) *Runner {
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "t"
		r, err := New(DefaultConfig(), ac, []string{"h1", "h2"}, Deps{Bus: via, Nova: cloud, Demand: d, Arbiter: consensus.NewLocal(time.Now), Clock: Wall{}, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		b.to[bus.ReplySubject(r.cfg.Region, h)] = func(s string, d []byte) { r.receiveAnswer(s, "", d) }
		b.to[bus.DemandSubject(r.cfg.Region, h)] = func(s string, d []byte) { r.answerDemand(s, "", d) }
		return r
	}
	return run
}

// A re-check asking another host's agent for its demand carries the
// plan's request id, and that agent reads its source under it: nova/fake's
// observer then knows which demand the plan saw. Without it, demand that
// changed after the agent's read and was read again by anyone (the host's
// monitor) made the plan answer for demand it never saw: dvms simulate
// --workload saturated counted 0-2 plan-overloads-destination violations
// a run that were drift (issue 11, point 6).
func TestDemandQueryCarriesRequestID(t *testing.T) {
	src := &requestSeen{}
	run := demandPeers(t)
	asker := run("h1", nil)
	run("h2", src)
	ctx := nova.WithRequestID(context.Background(), "req-plan")
	d, err := asker.askDemand(ctx, "h2")
	if err != nil || d["s1"].CPU != 1 {
		t.Fatalf("demand %v, %v", d, err)
	}
	if len(src.ids) != 1 || src.ids[0] != "req-plan" {
		t.Fatalf("h2 read its source under request ids %q, want [req-plan]", src.ids)
	}
}
