package sim

// Sites: hosts spread over sites whose round-trip times delay
// every message between agents, Vivaldi coordinates measured on real
// round trips of those delayed messages, and the locality figures of the
// report: inter-site migrations and messages, the coordinates' error, and
// inter-site migrations of events their initiator's site alone could
// solve.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// SitesConfig places the simulated hosts in sites.
type SitesConfig struct {
	// N sites (0 or 1: one site, no delays).
	N int
	// Intra and Inter are the RTTs inside a site and between two sites
	// (simulated time); a message is held half of it.
	Intra, Inter time.Duration
	// Coord tunes the agents' Vivaldi coordinates (probes over the bus).
	Coord node.CoordConfig
	// Warmup: before the agents start, their coordinates probe for up to
	// this long (simulated), until 95 % of them are used (error below
	// Coord.MaxError): the run starts as a region that has been up a
	// while, not a cold start. 0: the agents start at once.
	Warmup time.Duration
}

// Validate lists every problem.
func (c SitesConfig) Validate() error {
	var errs []error
	if c.N < 0 {
		errs = append(errs, errors.New("--sites must be >= 0"))
	}
	if c.Warmup < 0 {
		errs = append(errs, errors.New("--coord-warmup must be >= 0"))
	}
	if c.Intra < 0 || c.Inter < c.Intra {
		errs = append(errs, fmt.Errorf("--site-rtt %s,%s: need 0 <= intra <= inter", c.Intra, c.Inter))
	}
	if err := c.Coord.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseSiteRTT reads "intra,inter" (Go durations, "1ms,40ms").
func ParseSiteRTT(s string) (intra, inter time.Duration, err error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("--site-rtt %q: want intra,inter (1ms,40ms)", s)
	}
	if intra, err = time.ParseDuration(strings.TrimSpace(a)); err == nil {
		inter, err = time.ParseDuration(strings.TrimSpace(b))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("--site-rtt %q: %w", s, err)
	}
	return intra, inter, nil
}

// sites is the placement of hosts in sites and the locality counters.
type sites struct {
	cfg    SitesConfig
	region string
	of     map[string]int // host -> site
	clock  *node.Scaled
	table  *node.CoordTable

	messages atomic.Int64 // protocol messages between two sites
	// crossed: inter-site live migrations done, per event.
	mu      sync.Mutex
	crossed map[string]int
	// siteSolvable: events whose plan crossed sites, and whether their
	// initiator's site alone had a solution when they were planned.
	siteSolvable map[string]bool
	checks       chan siteCheck
	checksLost   atomic.Int64
}

type siteCheck struct {
	ev scheduler.Event
}

// siteSeed offsets the run's seed for the sites' draw (the same for ring
// and vivaldi runs of one seed).
const siteSeed = 7

// newSites spreads hosts over cfg.N sites, as many in each, at random
// (from seed: the same for ring and vivaldi runs of one seed). Host
// names are not in site order, as in a real region.
func newSites(cfg SitesConfig, region string, hosts []string, seed int64, clock *node.Scaled) *sites {
	s := &sites{cfg: cfg, region: region, of: make(map[string]int, len(hosts)), clock: clock, table: node.NewCoordTable(),
		crossed: map[string]int{}, siteSolvable: map[string]bool{}, checks: make(chan siteCheck, 4096)}
	for i, k := range siteOf(cfg, len(hosts), seed) {
		s.of[hosts[i]] = k
	}
	return s
}

// siteOf is the site of each of n hosts (by index): as many in each, at
// random from seed.
func siteOf(cfg SitesConfig, n int, seed int64) []int {
	out := make([]int, n)
	for k, i := range rand.New(rand.NewSource(seed)).Perm(n) {
		out[i] = k % max(cfg.N, 1)
	}
	return out
}

// zoneOf is the availability zone of a host of site k: with several
// sites each is a zone (site-1, site-2, ...), as a multi-site region maps
// them; with one, Nova's default zone.
func zoneOf(cfg SitesConfig, k int) string {
	if cfg.N <= 1 {
		return "nova"
	}
	return fmt.Sprintf("site-%d", k+1)
}

// rtt is the modelled RTT between two hosts.
func (s *sites) rtt(a, b string) time.Duration {
	if s.of[a] == s.of[b] {
		return s.cfg.Intra
	}
	return s.cfg.Inter
}

// transport is host's view of the bus: whatever it sends to another
// agent is held half the sites' RTT, and protocol messages between two
// sites are counted.
func (s *sites) transport(t bus.Transport, host string) *bus.Delayed {
	agents := bus.AgentSubject(s.region, "")
	return bus.NewDelayed(t, func(subject string) time.Duration {
		to := bus.SubjectHost(subject)
		if _, ok := s.of[to]; !ok {
			return 0
		}
		if s.of[to] != s.of[host] && strings.HasPrefix(subject, agents) {
			s.messages.Add(1)
		}
		return s.clock.Wall(s.rtt(host, to) / 2)
	})
}

// solved is the OnSolve hook: a plan whose moves cross sites is checked
// against the initiator's site alone (in the background: the check must
// not delay the agent).
func (s *sites) solved(req scheduler.SolveRequest, sol scheduler.Solution) {
	if !sol.OK || len(req.Problem.Events) == 0 || !s.crosses(sol.Moves) {
		return
	}
	select {
	case s.checks <- siteCheck{ev: req.Problem.Events[0]}:
	default:
		s.checksLost.Add(1)
	}
}

func (s *sites) crosses(moves []scheduler.Action) bool {
	return slices.ContainsFunc(moves, func(a scheduler.Action) bool {
		return a.Kind == scheduler.LiveMigrate && s.of[a.From] != s.of[a.To]
	})
}

// executed is the OnExec hook: inter-site live migrations done.
func (s *sites) executed(ev scheduler.Event, res node.ExecResult) {
	n := 0
	for _, a := range res.Actions {
		if a.Outcome == node.ActionDone && a.Action.Kind == scheduler.LiveMigrate && s.of[a.Action.From] != s.of[a.Action.To] {
			n++
		}
	}
	if n > 0 {
		s.mu.Lock()
		s.crossed[ev.ID] += n
		s.mu.Unlock()
	}
}

// checkSites runs the site checks until ctx ends.
func (s *sites) checkSites(ctx context.Context, cloud *fake.Cloud, cfg Config, hosts []string) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-s.checks:
			s.check(c, cloud, cfg, hosts)
		}
	}
}

// drainChecks runs the checks still queued (the run is over).
func (s *sites) drainChecks(cloud *fake.Cloud, cfg Config, hosts []string) {
	for {
		select {
		case c := <-s.checks:
			s.check(c, cloud, cfg, hosts)
		default:
			return
		}
	}
}

// check runs the solver over every host of the event's initiator's site,
// as the cloud is now.
func (s *sites) check(c siteCheck, cloud *fake.Cloud, cfg Config, hosts []string) {
	var local []scheduler.Host
	for _, h := range hosts {
		if s.of[h] != s.of[c.ev.Host] {
			continue
		}
		// The harness's reads cost Nova nothing and never queue.
		sh, err := node.Sample(context.Background(), cloud.Uncharged(), cloud, h, cfg.Runtime.DrainReason)
		if err == nil {
			local = append(local, sh)
		}
	}
	opt := scheduler.DefaultSolveOptions()
	opt.Restarts = 4
	sol := scheduler.Solve(scheduler.Problem{Events: []scheduler.Event{c.ev}, Hosts: local, Thresholds: cfg.Agent.Thresholds}, opt)
	s.mu.Lock()
	s.siteSolvable[c.ev.ID] = s.siteSolvable[c.ev.ID] || sol.OK
	s.mu.Unlock()
}

// converged is the fraction of hosts whose coordinate is used.
func (s *sites) converged(hosts []string) float64 {
	n := 0
	for _, h := range hosts {
		if c, ok := s.table.Get(h); ok && c.Error <= s.cfg.Coord.MaxError {
			n++
		}
	}
	return float64(n) / float64(len(hosts))
}

// warmup runs every host's coordinate alone (probing, answering) until
// 95 % are used or cfg.Warmup passes; it returns how long it took
// (simulated). The agents start from these coordinates.
func (s *sites) warmup(ctx context.Context, t bus.Transport, hosts []string, seed int64, log zerolog.Logger) (time.Duration, error) {
	start := s.clock.Now()
	if s.cfg.Warmup <= 0 {
		return 0, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	rng := rand.New(rand.NewSource(seed))
	for _, h := range hosts {
		d := s.transport(t, h)
		v, err := node.NewVivaldi(s.cfg.Coord, s.region, h, d, s.clock, s.table, rng.Int63(), log)
		if err != nil {
			return 0, err
		}
		v.SetPeers(hosts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.Close()
			if err := v.Run(wctx); err != nil {
				log.Error().Err(err).Str("host", h).Msg("coordinates stopped")
			}
		}()
	}
	tick := s.clock.NewTicker(time.Second)
	defer tick.Stop()
	for s.converged(hosts) < 0.95 && s.clock.Now().Sub(start) < s.cfg.Warmup {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
	return s.clock.Now().Sub(start), nil
}

// medianRelError is the median of |estimate - modelled| / modelled over
// pairs of hosts (all of them, or 20,000 drawn at random).
func (s *sites) medianRelError(hosts []string, rng *rand.Rand) (float64, int) {
	dist := s.table.Distance(math.Inf(1))
	var errs []float64
	pair := func(a, b string) {
		if a == b {
			return
		}
		if d, ok := dist(a, b); ok && s.rtt(a, b) > 0 {
			true := float64(s.rtt(a, b))
			errs = append(errs, math.Abs(float64(d)-true)/true)
		}
	}
	if len(hosts)*len(hosts) <= 20000 {
		for _, a := range hosts {
			for _, b := range hosts {
				pair(a, b)
			}
		}
	} else {
		for k := 0; k < 20000; k++ {
			pair(hosts[rng.Intn(len(hosts))], hosts[rng.Intn(len(hosts))])
		}
	}
	if len(errs) == 0 {
		return 0, 0
	}
	slices.Sort(errs)
	return errs[len(errs)/2], len(errs)
}

// report fills the report's locality figures.
func (s *sites) report(rep *Report, hosts []string, samples int64, rng *rand.Rand, coords bool) {
	rep.Sites.N = max(s.cfg.N, 1)
	rep.Sites.IntraMS, rep.Sites.InterMS = ms(s.cfg.Intra), ms(s.cfg.Inter)
	rep.Messages.InterSite = s.messages.Load()
	s.mu.Lock()
	for ev, n := range s.crossed {
		rep.Migrations.InterSite += n
		if s.siteSolvable[ev] {
			rep.Migrations.InterSiteSiteSolvable += n
		}
	}
	s.mu.Unlock()
	rep.Migrations.SiteChecksLost = s.checksLost.Load()
	if !coords {
		return
	}
	e, pairs := s.medianRelError(hosts, rng)
	rep.Coordinates.MedianRelError, rep.Coordinates.Pairs = round(e), pairs
	rep.Coordinates.Converged = round(s.converged(hosts))
	rep.Coordinates.SamplesPerAgent = round(float64(samples) / float64(len(hosts)))
}
