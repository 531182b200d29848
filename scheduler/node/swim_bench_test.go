package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/node"
)

// Membership at scale (issue 12): n agents in one process over SwimNet
// with memberlist's LAN timings and 10 % of datagrams lost; after they
// converge, the membership messages of a quiet window, then kill agents
// and time how long each other agent takes to report them down. Run one
// at a time (heavy):
//
//	go test ./scheduler/node -run '^$' -bench Swim -benchtime 1x
func BenchmarkSwim100(b *testing.B)  { benchSwim(b, 100, 3) }
func BenchmarkSwim1000(b *testing.B) { benchSwim(b, 1000, 5) }

func benchSwim(b *testing.B, n, kills int) {
	for range b.N {
		r := measureSwim(b, n, kills, 0.10, 30*time.Second)
		b.ReportMetric(r.msgsPerAgentSec, "msgs/agent/s")
		b.ReportMetric(r.detectP50.Seconds(), "detect-p50-s")
		b.ReportMetric(r.detectMax.Seconds(), "detect-max-s")
		b.ReportMetric(r.firstMax.Seconds(), "first-detect-max-s")
		b.ReportMetric(float64(r.falseDeaths), "false-deaths")
		b.ReportMetric(r.converge.Seconds(), "converge-s")
		b.Logf("agents=%d drop=10%% converge=%s msgs/agent/s=%.2f (datagrams %.2f, streams %.3f) killed=%d detect p50=%s max=%s first-by-anyone max=%s false_deaths=%d (observer, live agent) pairs missed=%d",
			n, r.converge.Round(time.Millisecond), r.msgsPerAgentSec, r.packetsPerAgentSec, r.streamsPerAgentSec,
			kills, r.detectP50.Round(time.Millisecond), r.detectMax.Round(time.Millisecond), r.firstMax.Round(time.Millisecond), r.falseDeaths, r.missed)
		if r.falseDeaths > 0 || r.missed > 0 {
			b.Errorf("%d live agents declared dead, %d (observer, killed) pairs never detected", r.falseDeaths, r.missed)
		}
	}
}

type swimReport struct {
	converge                                                time.Duration
	msgsPerAgentSec, packetsPerAgentSec, streamsPerAgentSec float64
	detectP50, detectMax, firstMax                          time.Duration
	falseDeaths, missed                                     int
}

// measureSwim runs memberlist's LAN timings unchanged except compression,
// off: it saves bandwidth, not detection, and costs CPU that n agents on
// one machine do not have.
func measureSwim(b *testing.B, n, kills int, drop float64, window time.Duration) swimReport {
	tune := func(c *memberlist.Config) { c.EnableCompression = false }
	b.Helper()
	netCtx, stopNet := context.WithCancel(context.Background())
	defer stopNet()
	sn, err := node.NewSwimNet(netCtx, drop)
	if err != nil {
		b.Fatal(err)
	}
	host := func(i int) string { return fmt.Sprintf("h%04d", i) }
	trs := make([]memberlist.NodeAwareTransport, n)
	for i := range trs {
		trs[i] = sn.Transport(host(i))
	}
	var (
		mu     sync.Mutex
		killed = map[string]time.Time{}
		downAt = map[[2]string]time.Time{} // (observer, dead) -> when
		falseD = map[[2]string]bool{}      // (observer, live agent declared dead)
		ups    = make([]atomic.Int64, n)
	)
	sw := make([]*node.Swim, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); stopNet() }()
	start := time.Now()
	for i := range n {
		cfg := node.SwimConfig{Self: node.Heartbeat{Host: host(i), Incarnation: "1"}, Transport: trs[i], Tune: tune}
		if i > 0 {
			cfg.Seeds = []string{sn.Addr(trs[0]), sn.Addr(trs[i/2])}
		}
		s, err := node.NewSwim(cfg, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		sw[i] = s
		self := host(i)
		s.OnUp = func(string) { ups[i].Add(1) }
		s.OnDown = func(h string) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if _, gone := killed[self]; gone {
				return // a killed agent hears no one: its view does not count
			}
			if _, ok := killed[h]; !ok {
				if len(falseD) < 5 {
					b.Logf("false death: %s declared %s dead", self, h)
				}
				falseD[[2]string{self, h}] = true
				return
			}
			downAt[[2]string{self, h}] = now
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil {
				b.Error(err)
			}
		}()
	}
	converged := func() bool {
		for i := range ups {
			if ups[i].Load() < int64(n-1) || len(sw[i].Members()) != n {
				return false
			}
		}
		return true
	}
	for !converged() {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("%d agents not converged after 10 min", n)
		}
		time.Sleep(2 * time.Second)
	}
	var r swimReport
	r.converge = time.Since(start)

	p0, s0 := sn.Packets.Load(), sn.Streams.Load()
	time.Sleep(window)
	secs := window.Seconds()
	r.packetsPerAgentSec = float64(sn.Packets.Load()-p0) / float64(n) / secs
	r.streamsPerAgentSec = float64(sn.Streams.Load()-s0) / float64(n) / secs
	r.msgsPerAgentSec = r.packetsPerAgentSec + r.streamsPerAgentSec

	victims := make([]string, 0, kills)
	mu.Lock()
	for k := range kills {
		i := n - 1 - k*(n/kills) // spread over the ring, never agent 0
		victims = append(victims, host(i))
		killed[host(i)] = time.Now()
		sn.Kill(trs[i])
	}
	mu.Unlock()
	isVictim := func(h string) bool { return slices.Contains(victims, h) }
	want := (n - kills) * kills
	deadline := time.Now().Add(5 * time.Minute)
	for {
		mu.Lock()
		got := len(downAt)
		mu.Unlock()
		if got >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var all []time.Duration
	first := map[string]time.Duration{}
	for k, at := range downAt {
		if isVictim(k[0]) {
			continue
		}
		d := at.Sub(killed[k[1]])
		all = append(all, d)
		if f, ok := first[k[1]]; !ok || d < f {
			first[k[1]] = d
		}
	}
	slices.Sort(all)
	if len(all) > 0 {
		r.detectP50, r.detectMax = all[len(all)/2], all[len(all)-1]
	}
	for _, d := range first {
		r.firstMax = max(r.firstMax, d)
	}
	r.falseDeaths, r.missed = len(falseD), want-len(all)
	return r
}
