package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/node"
)

// swimFast shortens memberlist's LAN timings so a test runs in seconds;
// the protocol (probe, indirect probes, suspicion, refutation) is the same.
func swimFast(c *memberlist.Config) {
	c.ProbeInterval, c.ProbeTimeout = 200*time.Millisecond, 100*time.Millisecond
	c.GossipInterval, c.PushPullInterval = 40*time.Millisecond, 2*time.Second
	c.TCPTimeout = time.Second
}

// Agents join over the in-memory network, none is declared dead while
// alive with 10 % of datagrams lost, and a killed one is reported down by
// every other.
func TestSwimJoinKillNoFalseDeathAtTenPercentLoss(t *testing.T) {
	const n = 8
	netCtx, stopNet := context.WithCancel(context.Background())
	defer stopNet()
	sn, err := node.NewSwimNet(netCtx, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	trs := make([]memberlist.NodeAwareTransport, n)
	for i := range trs {
		trs[i] = sn.Transport(fmt.Sprintf("h%02d", i))
	}
	ev := make([]*memberEvents, n)
	sw := make([]*node.Swim, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); stopNet() }()
	for i := range n {
		cfg := node.SwimConfig{Self: node.Heartbeat{Host: fmt.Sprintf("h%02d", i), Site: "site-a", Incarnation: "1"},
			Transport: trs[i], Tune: swimFast}
		if i > 0 {
			cfg.Seeds = []string{sn.Addr(trs[0])}
		}
		s, err := node.NewSwim(cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		e := &memberEvents{}
		s.OnUp = func(h string) { e.mu.Lock(); e.up = append(e.up, h); e.mu.Unlock() }
		s.OnDown = func(h string) { e.mu.Lock(); e.down = append(e.down, h); e.mu.Unlock() }
		ev[i], sw[i] = e, s
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	if !waitFor(t, 20*time.Second, func() bool {
		for _, s := range sw {
			if len(s.Members()) != n {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not every agent sees %d members", n)
	}
	for i, e := range ev {
		for j := range n {
			if h := fmt.Sprintf("h%02d", j); i != j && !e.has(&e.up, h) {
				t.Errorf("h%02d: no MemberUp for %s", i, h)
			}
		}
	}
	// Ten seconds at 10 % loss: fifty probe rounds for each agent.
	time.Sleep(10 * time.Second)
	sn.Kill(trs[n-1])
	killed := fmt.Sprintf("h%02d", n-1)
	if !waitFor(t, 30*time.Second, func() bool {
		for _, e := range ev[:n-1] {
			if !e.has(&e.down, killed) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("killed %s not reported down by every agent", killed)
	}
	for i, e := range ev[:n-1] {
		e.mu.Lock()
		if len(e.down) != 1 {
			t.Errorf("h%02d: MemberDown %v, want only %s (a live agent declared dead)", i, e.down, killed)
		}
		e.mu.Unlock()
		if got := len(sw[i].Members()); got != n-1 {
			t.Errorf("h%02d: %d members after the kill, want %d", i, got, n-1)
		}
	}
	if sn.Dropped.Load() == 0 || sn.Packets.Load() == 0 {
		t.Errorf("no datagram dropped (%d sent): the loss is not exercised", sn.Packets.Load())
	}
}

func TestSwimConfigRejectsBadInput(t *testing.T) {
	if _, err := node.NewSwim(node.SwimConfig{}, zerolog.Nop()); err == nil {
		t.Error("empty config accepted")
	}
	if _, err := node.NewSwimNet(context.Background(), 1.5); err == nil {
		t.Error("drop 150 % accepted")
	}
}
