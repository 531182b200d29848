// Package migest estimates live migrations from the ones an agent has
// seen: how long a move takes and whether it converges at all. It is
// pure: it is fed observations (the runtime feeds it from the executor,
// which follows every migration's progress in Nova) and reads no clock.
//
// The model: a live migration copies the guest's memory at the
// bandwidth of its host pair while the guest dirties it again; pre-copy
// sends RAM / (1 - dirty / bandwidth) in all, so it takes
//
//	overhead + RAM / (bandwidth - dirty)
//
// and does not converge when the guest dirties memory about as fast as
// the pair copies it (dirty >= Converge x bandwidth). The bandwidth of a
// pair is an exponentially weighted moving average (Config.Weight) of
// what its migrations achieved; a pair never seen takes the site-wide
// average, and before any observation the configured constant
// (Config.BandwidthMBps). A server's dirty rate is the average of what
// its migrations showed; a server never seen dirties nothing.
package migest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// Config tunes the estimator.
type Config struct {
	// BandwidthMBps is the live-migration bandwidth assumed before any
	// migration was seen (MB/s). Default 1000 (a 10 GbE migration
	// network, a little below line rate).
	BandwidthMBps float64
	// Weight is the weight of a new observation in the moving averages,
	// in (0, 1]. Default 0.3: the last few migrations dominate, one slow
	// outlier does not.
	Weight float64
}

// DefaultConfig returns 1000 MB/s and weight 0.3.
func DefaultConfig() Config { return Config{BandwidthMBps: 1000, Weight: 0.3} }

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if !(c.BandwidthMBps > 0) {
		errs = append(errs, fmt.Errorf("migration_bandwidth must be > 0, got %v", c.BandwidthMBps))
	}
	if !(c.Weight > 0 && c.Weight <= 1) {
		errs = append(errs, fmt.Errorf("migration_estimate_weight must be in (0, 1], got %v", c.Weight))
	}
	return errors.Join(errs...)
}

// Converge is the fraction of a pair's bandwidth a guest's dirty rate
// must stay below for its pre-copy to converge: above it, each pass
// leaves nearly as much to copy as the one before.
const Converge = 0.9

// maxEntries bounds each table (pairs, servers): the oldest updated entry
// is forgotten first.
const maxEntries = 4096

// Observation is one live migration as the executor followed it.
type Observation struct {
	Server   string
	From, To string
	// Took is from the request to the migration's end.
	Took time.Duration
	// Copying is the time between the first and the last progress read
	// with memory figures (0 when Nova reported none); over it, CopiedMB
	// is the growth of memory_processed_bytes and RemainingChangeMB that
	// of memory_remaining_bytes (negative while it converges): what the
	// guest dirtied meanwhile is their sum.
	Copying           time.Duration
	CopiedMB          float64
	RemainingChangeMB float64
	// TotalMB is the guest's memory (memory_total_bytes), 0 when unknown.
	TotalMB float64
	// RAMMB is the server's flavor RAM (used when TotalMB is 0).
	RAMMB float64
	// Completed: the migration completed (forced or not); false when it
	// was aborted or failed.
	Completed bool
}

// Estimate is the prediction for one move.
type Estimate struct {
	Duration  time.Duration
	Converges bool
	// BandwidthMBps and DirtyMBps are the figures used; Source says
	// where the bandwidth came from: "pair", "site" or "configured".
	BandwidthMBps, DirtyMBps float64
	Source                   string
}

type avg struct {
	v    float64
	seen uint64 // update counter, for eviction
}

// Estimator learns from observations. Safe for concurrent use; the
// solver reads a Snapshot.
type Estimator struct {
	cfg      Config
	mu       sync.Mutex
	n        uint64
	pair     map[[2]string]avg
	dirty    map[string]avg
	site     avg // bandwidth, all pairs
	overhead avg // seconds outside the copy
	siteSeen bool
	ovSeen   bool
}

// New returns an estimator that knows nothing yet.
func New(cfg Config) *Estimator {
	if cfg.Validate() != nil {
		cfg = DefaultConfig()
	}
	return &Estimator{cfg: cfg, pair: map[[2]string]avg{}, dirty: map[string]avg{}}
}

// Observe learns from one migration. An observation without memory
// figures (a fake virt driver) teaches the overall bandwidth of the
// pair from the RAM and the whole duration; one with them teaches the
// copy bandwidth, the overhead and the server's dirty rate.
func (e *Estimator) Observe(o Observation) {
	if o.Took <= 0 || o.From == "" || o.To == "" {
		return
	}
	total := o.TotalMB
	if total <= 0 {
		total = o.RAMMB
	}
	var bw, dirty float64
	haveDirty := false
	switch {
	case o.Copying > 0 && o.CopiedMB > 0:
		secs := o.Copying.Seconds()
		bw = o.CopiedMB / secs
		// Remaining memory falls by what is copied and rises by what
		// the guest dirties again.
		dirty, haveDirty = max(0, o.CopiedMB+o.RemainingChangeMB)/secs, true
	case o.Completed && total > 0:
		bw = total / o.Took.Seconds()
	default:
		return // an aborted or failed move without figures says nothing
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	w := e.cfg.Weight
	k := [2]string{o.From, o.To}
	if bw > 0 && (o.Completed || haveDirty) {
		e.pair[k] = ewma(e.pair[k], bw, w, e.n)
		e.site = ewma(e.site, bw, w, e.n)
		if !e.siteSeen {
			e.site.v, e.siteSeen = bw, true
		}
		evict(e.pair)
	}
	if haveDirty {
		e.dirty[o.Server] = ewma(e.dirty[o.Server], dirty, w, e.n)
		evict(e.dirty)
		if o.Completed {
			ov := max(0, (o.Took - o.Copying).Seconds())
			e.overhead = ewma(e.overhead, ov, w, e.n)
			if !e.ovSeen {
				e.overhead.v, e.ovSeen = ov, true
			}
		}
	}
}

// ewma folds x into a (the first value is taken as it is).
func ewma(a avg, x, w float64, n uint64) avg {
	if a.seen == 0 {
		return avg{v: x, seen: n}
	}
	return avg{v: a.v + w*(x-a.v), seen: n}
}

// evict forgets the oldest entry of a table over maxEntries.
func evict[K comparable](m map[K]avg) {
	if len(m) <= maxEntries {
		return
	}
	var oldest K
	first := true
	var at uint64
	for k, v := range m {
		if first || v.seen < at {
			oldest, at, first = k, v.seen, false
		}
	}
	delete(m, oldest)
}

// Snapshot is a frozen copy for one solve (the executor may observe
// meanwhile).
func (e *Estimator) Snapshot() *Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &Snapshot{cfg: e.cfg, pair: make(map[[2]string]float64, len(e.pair)), dirty: make(map[string]float64, len(e.dirty))}
	for k, v := range e.pair {
		s.pair[k] = v.v
	}
	for k, v := range e.dirty {
		s.dirty[k] = v.v
	}
	if e.siteSeen {
		s.site = e.site.v
	}
	if e.ovSeen {
		s.overhead = e.overhead.v
	}
	return s
}

// Snapshot is what the estimator knew at one time. It implements
// scheduler.MigrationModel. Read-only: safe for concurrent use.
type Snapshot struct {
	cfg      Config
	pair     map[[2]string]float64
	dirty    map[string]float64
	site     float64 // 0: never seen
	overhead float64 // seconds
}

var _ scheduler.MigrationModel = (*Snapshot)(nil)

// Estimate predicts the live migration of a.
func (s *Snapshot) Estimate(a scheduler.Action) Estimate {
	est := Estimate{BandwidthMBps: s.cfg.BandwidthMBps, Source: "configured"}
	if bw, ok := s.pair[[2]string{a.From, a.To}]; ok && bw > 0 {
		est.BandwidthMBps, est.Source = bw, "pair"
	} else if s.site > 0 {
		est.BandwidthMBps, est.Source = s.site, "site"
	}
	est.DirtyMBps = s.dirty[a.Server]
	est.Converges = est.DirtyMBps < Converge*est.BandwidthMBps
	ram := float64(a.RAMMB)
	if ram <= 0 {
		ram = a.RAM
	}
	rate := est.BandwidthMBps - est.DirtyMBps
	if !est.Converges {
		rate = (1 - Converge) * est.BandwidthMBps // it ends only when forced or aborted
	}
	est.Duration = time.Duration((s.overhead + ram/rate) * float64(time.Second))
	return est
}

// Migration implements scheduler.MigrationModel.
func (s *Snapshot) Migration(a scheduler.Action) (time.Duration, bool) {
	e := s.Estimate(a)
	return e.Duration, e.Converges
}
