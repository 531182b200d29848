package migest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

func mv(server string, ramMB int, from, to string) scheduler.Action {
	return scheduler.Action{Kind: scheduler.LiveMigrate, Server: server, From: from, To: to, RAMMB: ramMB}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// Before any migration the configured bandwidth; after one on a pair,
// that pair's; another pair then takes the site-wide figure.
func TestFallbackPairSiteConfigured(t *testing.T) {
	e := New(Config{BandwidthMBps: 1000, Weight: 0.3})
	if est := e.Snapshot().Estimate(mv("s", 2048, "a", "b")); est.Source != "configured" || est.BandwidthMBps != 1000 || !est.Converges ||
		est.Duration != 2048*time.Millisecond {
		t.Fatalf("nothing seen: %+v, want 1000 MB/s configured, 2.048 s", est)
	}
	// A fake-driver migration (no figures): 4096 MB in 8 s = 512 MB/s.
	e.Observe(Observation{Server: "x", From: "a", To: "b", Took: 8 * time.Second, RAMMB: 4096, Completed: true})
	s := e.Snapshot()
	if est := s.Estimate(mv("s", 2048, "a", "b")); est.Source != "pair" || !near(est.BandwidthMBps, 512) {
		t.Errorf("a -> b: %+v, want the pair's 512 MB/s", est)
	}
	if est := s.Estimate(mv("s", 2048, "b", "a")); est.Source != "site" || !near(est.BandwidthMBps, 512) {
		t.Errorf("b -> a: %+v, want the site's 512 MB/s", est)
	}
	// An aborted migration without figures teaches nothing.
	e.Observe(Observation{Server: "y", From: "a", To: "c", Took: time.Hour, RAMMB: 4096})
	if est := e.Snapshot().Estimate(mv("s", 2048, "a", "c")); est.Source != "site" {
		t.Errorf("a -> c after an aborted move without figures: %+v, want the site figure", est)
	}
}

// The pair's bandwidth is an EWMA: 100 then 200 MB/s with weight 0.3
// is 130.
func TestBandwidthIsAMovingAverage(t *testing.T) {
	e := New(Config{BandwidthMBps: 1000, Weight: 0.3})
	for _, bw := range []float64{100, 200} {
		e.Observe(Observation{Server: "x", From: "a", To: "b", Took: 10 * time.Second, Copying: 10 * time.Second,
			CopiedMB: bw * 10, RemainingChangeMB: -bw * 10, TotalMB: 4096, RAMMB: 4096, Completed: true})
	}
	if est := e.Snapshot().Estimate(mv("x", 1024, "a", "b")); !near(est.BandwidthMBps, 130) || est.DirtyMBps != 0 {
		t.Errorf("%+v, want 130 MB/s, no dirty rate", est)
	}
}

// A server's dirty rate comes from the memory figures: copied plus the
// change of the remaining memory over the copy time. It decides
// convergence on each pair, and the duration grows with RAM and with
// the dirty rate.
func TestDirtyRateDecidesConvergence(t *testing.T) {
	e := New(DefaultConfig())
	// 20 s copying 100 MB/s while remaining memory fell by only 400 MB:
	// 1600 MB dirtied again, 80 MB/s.
	e.Observe(Observation{Server: "busy", From: "a", To: "b", Took: 25 * time.Second, Copying: 20 * time.Second,
		CopiedMB: 2000, RemainingChangeMB: -400, TotalMB: 2048, RAMMB: 2048, Completed: true})
	s := e.Snapshot()
	est := s.Estimate(mv("busy", 2048, "a", "b"))
	if !near(est.DirtyMBps, 80) || !near(est.BandwidthMBps, 100) || !est.Converges {
		t.Fatalf("%+v, want 80 MB/s dirty on 100 MB/s: converges (below 0.9)", est)
	}
	want := 5*time.Second + time.Duration(2048.0/20*float64(time.Second)) // overhead + RAM / (bw - dirty)
	if d := est.Duration - want; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("duration %s, want %s", est.Duration, want)
	}
	if big := s.Estimate(mv("busy", 4096, "a", "b")); big.Duration <= est.Duration {
		t.Errorf("4 GiB %s not longer than 2 GiB %s", big.Duration, est.Duration)
	}
	if calm := s.Estimate(mv("calm", 2048, "a", "b")); calm.Duration >= est.Duration || !calm.Converges {
		t.Errorf("a server never seen dirtying: %+v, want shorter than %s", calm, est.Duration)
	}
	// A slower pair does not converge for it: 80 >= 0.9 x 85.
	e.Observe(Observation{Server: "other", From: "a", To: "c", Took: 10 * time.Second, Copying: 10 * time.Second,
		CopiedMB: 850, RemainingChangeMB: -850, TotalMB: 2048, RAMMB: 2048, Completed: true})
	if est := e.Snapshot().Estimate(mv("busy", 2048, "a", "c")); est.Converges {
		t.Errorf("busy on a -> c: %+v, want not converging", est)
	}
	// The snapshot taken before is frozen.
	if est := s.Estimate(mv("busy", 2048, "a", "c")); !est.Converges {
		t.Errorf("old snapshot changed: %+v", est)
	}
}

// The tables are bounded: the oldest updated entries go first.
func TestTablesAreBounded(t *testing.T) {
	e := New(DefaultConfig())
	for i := range maxEntries + 10 {
		e.Observe(Observation{Server: fmt.Sprint("s", i), From: fmt.Sprint("h", i), To: "b", Took: time.Second, Copying: time.Second,
			CopiedMB: 100, RemainingChangeMB: -50, TotalMB: 1024, RAMMB: 1024, Completed: true})
	}
	if len(e.pair) != maxEntries || len(e.dirty) != maxEntries {
		t.Fatalf("%d pairs, %d servers, want %d each", len(e.pair), len(e.dirty), maxEntries)
	}
	if _, ok := e.pair[[2]string{"h0", "b"}]; ok {
		t.Error("the oldest pair is still there")
	}
	if _, ok := e.pair[[2]string{fmt.Sprint("h", maxEntries+9), "b"}]; !ok {
		t.Error("the newest pair is gone")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{BandwidthMBps: 0, Weight: 1.5}).Validate(); err == nil {
		t.Fatal("accepted a zero bandwidth and a weight above 1")
	}
}
