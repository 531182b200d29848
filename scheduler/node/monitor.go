package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"regexp"
	"strconv"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// The monitor (DESIGN §4): every Config.Monitor it measures demand with
// the local source and judges it against a cached view of the host, so the
// per-second path costs Nova nothing. The view is re-read from Nova
//
//   - servers (one request): every Config.Refresh, and at once when the
//     agent leaves a partition (a plan may have moved servers in or out).
//     Not when it joins one: the partition's snapshot is the last sample,
//     sent at once, before any read could answer;
//   - service, capacity and usage (three requests): every
//     Config.PlacementRefresh, at once when the region's maintenance watch
//     reports a change of this host's service (the agent samples the
//     notice's service first, then reads), on RequestRefresh, or when
//     the cached view is empty.
//
// Each period is drawn anew after each read within ±10 % of its setting,
// so agents started together do not all read Nova in the same second of
// every period (10,000 agents at once would queue a 500 requests/s API
// for 20 s each time). Between placement reads the usage is the sum of the
// listed servers' flavors (what placement holds at rest; a migration in
// flight is seen at the next placement read). A partition's snapshot is
// the last sample: the executor re-reads from Nova what each move needs
// (executor.go), so a stale view costs a plan, never safety.

// hostView is what the agent last read of its host from Nova.
type hostView struct {
	host      nova.Host
	servers   []nova.Server
	serversAt time.Time
	sched     Refresh // when to re-read
	urgent    bool    // sample at once (the service changed)
}

// Refresh is when the monitor re-reads its host from Nova (see the
// package comment): a step function of time and the triggers, shared by
// the refresher (which does the reads) and the virtual clock (which counts
// them, scheduler/detsim).
type Refresh struct {
	// PlacementAt is the last read of service, capacity and usage (zero:
	// never); ServersDue and PlacementDue are when the periodic re-reads
	// are due (Refresh and PlacementRefresh after the last read,
	// jittered).
	PlacementAt              time.Time
	ServersDue, PlacementDue time.Time
}

// Due says what to read at now: everything when forced (a notice, a
// request) or never read, or when due; the servers also when servers (the
// agent left a partition).
func (s Refresh) Due(now time.Time, forced, servers bool) (placement, srv bool) {
	placement = forced || s.PlacementAt.IsZero() || !now.Before(s.PlacementDue)
	return placement, servers || placement || !now.Before(s.ServersDue)
}

// Read notes a read at now (placement: service, capacity and usage;
// servers: the servers) and draws the next one's time within ±10 % of its
// period (cfg's Refresh and PlacementRefresh).
func (s *Refresh) Read(now time.Time, placement, servers bool, cfg Config, jitter *rand.Rand) {
	if placement {
		s.PlacementAt, s.PlacementDue = now, now.Add(jittered(cfg.PlacementRefresh, jitter))
	}
	if servers {
		s.ServersDue = now.Add(jittered(cfg.Refresh, jitter))
	}
}

// monitor samples the host every Config.Monitor and hands samples to
// the agent goroutine. The Nova reads run in refresher, its own
// goroutine: a slow or failing Nova never delays the per-second sample,
// which goes on with the last view.
func (r *Runner) monitor(ctx context.Context) {
	defer r.wg.Done()
	views := make(chan hostView, 1)
	r.wg.Add(1)
	go r.refresher(ctx, views)
	t := r.d.Clock.NewTicker(r.cfg.Monitor)
	defer t.Stop()
	var v hostView
	have := false
	obs, _ := r.d.Demand.(nova.ServersObserver)
	failing := "" // the source's last failure, logged when it changes
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case nv := <-views:
			if obs != nil && (!have || nv.serversAt != v.serversAt) {
				obs.ObserveServers(r.agent.ID(), nv.servers) // the listing it read anyway: no request
			}
			v, have = nv, true
			if !nv.urgent {
				continue // the next tick samples: a refresh is not one more sample in the K-of-N window
			}
		}
		if !have {
			continue // no view of the host yet: no sample, no event from missing data
		}
		var demand map[string]nova.Demand
		if r.d.Demand != nil {
			var err error
			if demand, err = r.d.Demand.Demand(ctx, r.agent.ID()); err != nil {
				// Once per change, not every second: a blind source fails
				// the same way until something changes.
				if ctx.Err() == nil && err.Error() != failing {
					failing = err.Error()
					r.log.Warn().Err(err).Msg("monitor: demand source failed: no sample, no event from missing data")
				}
				continue
			}
			if failing != "" {
				failing = ""
				r.log.Info().Int("servers", len(demand)).Msg("monitor: demand source measures again")
			}
		}
		h := ToHost(v.host, v.servers, demand, r.cfg.DrainReason)
		r.setLast(h, demand)
		select {
		case r.samples <- h:
		case <-ctx.Done():
			return
		default: // the agent has not taken the previous sample yet: skip
		}
	}
}

// refresher keeps the view of the host (see the package comment) and
// hands each new one to the monitor, the latest replacing one not taken.
// A failed read is retried after a backoff (doubling from the monitor
// interval up to Refresh), not every second.
func (r *Runner) refresher(ctx context.Context, out chan hostView) {
	defer r.wg.Done()
	t := r.d.Clock.NewTicker(r.cfg.Monitor)
	defer t.Stop()
	var v hostView
	var retryAt time.Time
	backoff := r.cfg.Monitor
	jitter := rand.New(rand.NewSource(r.d.Seed ^ int64(hashString(r.agent.ID()))))
	for {
		forced, urgent, servers := v.sched.PlacementAt.IsZero(), false, false
		var noticed *nova.Service // the service a notice said, when one did
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if r.d.Clock.Now().Before(retryAt) {
				continue
			}
		case <-r.refresh:
			forced = true
		case <-r.partRefresh:
			servers = true
		case s := <-r.svc:
			if v.sched.PlacementAt.IsZero() || sameService(v.host.Service, s) {
				continue // nothing new: the periodic republish of the watch
			}
			// The watch says the service changed: sample at once with the
			// notice's service (signed by a ring member), then re-read the
			// host from Nova. The notice is a hint, Nova the truth: a plan
			// it starts moves nothing before the executor has re-read the
			// service from Nova (executor_reason.go), and the read below
			// corrects the view. Reading first would put three Nova round
			// trips on the path of a drain's first migration.
			r.log.Info().Str("status", s.Status).Str("reason", s.DisabledReason).Msg("service change reported by the region's watch: sampling now, re-reading it from nova")
			hint := v
			hint.host.Service, hint.urgent = s, true
			offer(out, hint)
			forced, urgent = true, false
			noticed = &s
		}
		read, err := r.refreshView(ctx, &v, forced, servers, jitter)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Dur("retry_in", backoff).Msg("monitor: refresh from nova failed: sampling goes on with the last view")
			}
			retryAt, backoff = r.d.Clock.Now().Add(backoff), min(2*backoff, r.cfg.Refresh)
			continue
		}
		retryAt, backoff = time.Time{}, r.cfg.Monitor
		if !read {
			continue
		}
		nv := v
		// Nova's answer is sampled at once when it contradicts the
		// notice the agent just sampled.
		nv.urgent = urgent || noticed != nil && !sameService(*noticed, v.host.Service)
		offer(out, nv)
	}
}

// offer hands v to the monitor, replacing a view it has not taken (an
// urgent one stays urgent).
func offer(out chan hostView, v hostView) {
	select {
	case out <- v:
	default:
		select { // replace the view the monitor has not taken
		case old := <-out:
			v.urgent = v.urgent || old.urgent
		default:
		}
		select {
		case out <- v:
		default:
		}
	}
}

// refreshView re-reads from Nova what is due (see the package comment):
// everything when forced, the servers when servers; read says whether it
// read anything.
func (r *Runner) refreshView(ctx context.Context, v *hostView, forced, servers bool, jitter *rand.Rand) (read bool, err error) {
	now := r.d.Clock.Now()
	host := r.agent.ID()
	placement, servers := v.sched.Due(now, forced, servers)
	if placement {
		h, err := r.d.Nova.Host(ctx, host)
		if err != nil {
			return false, fmt.Errorf("refresh %s: %w", host, err)
		}
		r.exec.ObserveLatency(r.d.Clock.Now().Sub(now))
		v.host = h
		v.sched.Read(now, true, false, r.cfg, jitter)
	}
	if servers {
		start := r.d.Clock.Now()
		ss, err := r.d.Nova.Servers(ctx, host)
		if err != nil {
			return placement, fmt.Errorf("refresh servers of %s: %w", host, err)
		}
		r.exec.ObserveLatency(r.d.Clock.Now().Sub(start))
		v.servers, v.serversAt = ss, now
		v.sched.Read(now, false, true, r.cfg, jitter)
		if !placement {
			v.host.VCPUsUsed, v.host.RAMMBUsed = flavorUsage(ss)
		}
	}
	return placement || servers, nil
}

// jittered is d within ±10 %, at random.
func jittered(d time.Duration, rng *rand.Rand) time.Duration {
	return d - d/10 + time.Duration(rng.Int63n(int64(d/5)+1))
}

// hashString is FNV-1a of s (a per-host seed).
func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// flavorUsage is what placement holds for servers at rest.
func flavorUsage(ss []nova.Server) (vcpus, ramMB int) {
	for _, s := range ss {
		vcpus += s.VCPUs
		ramMB += s.RAMMB
	}
	return vcpus, ramMB
}

func sameService(a, b nova.Service) bool {
	return a.Status == b.Status && a.State == b.State && a.DisabledReason == b.DisabledReason && a.ForcedDown == b.ForcedDown
}

// RequestRefresh asks the monitor for a full re-read of the host from
// Nova at its next turn (tools and tests; the runner asks on its own when
// the agent joins or leaves a partition).
func (r *Runner) RequestRefresh() { r.requestRefresh() }

// requestRefresh asks the monitor for a full re-read at its next turn.
func (r *Runner) requestRefresh() {
	select {
	case r.refresh <- struct{}{}:
	default: // one is pending already
	}
}

// partitionRefresh asks the monitor to re-read the host's servers at its
// next turn (the agent left a partition).
func (r *Runner) partitionRefresh() {
	select {
	case r.partRefresh <- struct{}{}:
	default: // one is pending already
	}
}

func (r *Runner) setLast(h scheduler.Host, demand map[string]nova.Demand) {
	r.lastMu.Lock()
	r.last, r.hasLast, r.lastWhen, r.lastDemand = h, true, r.d.Clock.Now(), demand
	r.lastMu.Unlock()
}

// lastMeasured is the local source's last measurement (every server it
// measured, listed in the cached view or not yet).
func (r *Runner) lastMeasured() (map[string]nova.Demand, time.Time, bool) {
	r.lastMu.Lock()
	defer r.lastMu.Unlock()
	return r.lastDemand, r.lastWhen, r.hasLast && r.lastDemand != nil
}

// LastSample is the agent's latest view of its host (demand included), as
// of its last sample; ok is false before the first one.
func (r *Runner) LastSample() (h scheduler.Host, ok bool) {
	r.lastMu.Lock()
	defer r.lastMu.Unlock()
	return r.last, r.hasLast
}

// Sample reads one host's snapshot from Nova and the demand source (five
// requests: the service, placement and the servers). The agent's monitor
// does not use it every second; harnesses and one-off reads do.
func Sample(ctx context.Context, c nova.Client, d nova.DemandSource, host string, drain *regexp.Regexp) (scheduler.Host, error) {
	h, err := c.Host(ctx, host)
	if err != nil {
		return scheduler.Host{}, fmt.Errorf("sample %s: %w", host, err)
	}
	servers, err := c.Servers(ctx, host)
	if err != nil {
		return scheduler.Host{}, fmt.Errorf("sample %s servers: %w", host, err)
	}
	var demand map[string]nova.Demand
	if d != nil {
		if demand, err = d.Demand(ctx, host); err != nil {
			return scheduler.Host{}, fmt.Errorf("sample %s demand: %w", host, err)
		}
	}
	return ToHost(h, servers, demand, drain), nil
}

// UnknownDemand is the demand detection assumes for a server its source
// does not measure: the flavor's RAM, no CPU (a server that just arrived,
// or whose source has no reading yet), so no event fires from missing
// data. The executor's fit check assumes the most instead: the flavor.
func UnknownDemand(s nova.Server) nova.Demand { return nova.Demand{RAMMB: float64(s.RAMMB)} }

// ToHost converts Nova's view of a host into the solver's.
func ToHost(h nova.Host, servers []nova.Server, demand map[string]nova.Demand, drain *regexp.Regexp) scheduler.Host {
	out := scheduler.Host{
		Name: h.Name, Zone: h.Zone, CPUs: float64(h.VCPUs), RAMMB: float64(h.RAMMB),
		AllocVCPUs: h.AllocatableVCPUs(), AllocRAMMB: h.AllocatableRAMMB(),
		UsedVCPUs: float64(h.VCPUsUsed), UsedRAMMB: float64(h.RAMMBUsed),
		Disabled: h.Service.Disabled() || h.Service.State == nova.ServiceDown || h.Service.ForcedDown,
	}
	out.Draining = h.Service.Disabled() && drain != nil && drain.MatchString(h.Service.DisabledReason)
	for _, s := range servers {
		sv := scheduler.Server{ID: s.ID, VCPUs: s.VCPUs, RAMMB: s.RAMMB}
		dm, ok := demand[s.ID]
		if !ok {
			dm = UnknownDemand(s)
		}
		sv.CPU, sv.RAM = dm.CPU, dm.RAMMB
		if s.Group != nil {
			sv.Group, sv.Policy = s.Group.ID, s.Group.Policy
		}
		if p, err := strconv.Atoi(s.Metadata[nova.MetaPriority]); err == nil {
			sv.Priority = p
		}
		switch {
		case s.Metadata[nova.MetaPin] == "true":
			sv.Fixed, sv.FixedReason = true, "pinned by dvms:pin"
		case s.Locked:
			sv.Fixed, sv.FixedReason = true, "locked"
		case s.Status != nova.StatusActive:
			sv.Fixed, sv.FixedReason = true, "status "+s.Status
		case s.TaskState != "":
			sv.Fixed, sv.FixedReason = true, "task state "+s.TaskState
		case sv.Policy == nova.PolicyAffinity:
			sv.Fixed, sv.FixedReason = true, "in affinity group "+s.Group.Name
		}
		out.Servers = append(out.Servers, sv)
	}
	return out
}

// OnlyHost restricts a demand source to one host, as a cgroup source is:
// any other host is nova.ErrNotMeasured. Harnesses use it so a simulated
// agent measures what a real one can.
func OnlyHost(d nova.DemandSource, host string) nova.DemandSource {
	if d == nil {
		return nil
	}
	return onlyHost{d, host}
}

type onlyHost struct {
	d    nova.DemandSource
	host string
}

func (o onlyHost) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	if host != o.host {
		return nil, fmt.Errorf("measures %s only, asked for %s: %w", o.host, host, nova.ErrNotMeasured)
	}
	return o.d.Demand(ctx, host)
}

// errNotMeasured reports whether err says the source does not measure
// that host (not a failure).
func errNotMeasured(err error) bool { return errors.Is(err, nova.ErrNotMeasured) }
