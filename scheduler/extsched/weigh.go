package extsched

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// Config is the weighing's configuration.
type Config struct {
	// StaleAfter: a summary older than this (3 × the agents' summary
	// interval by default) is not used; the host is unknown.
	StaleAfter time.Duration
	// PendingTTL: a host this service put first for a boot carries the
	// flavor for this long (until its agent's view shows the server).
	PendingTTL time.Duration
	// MaxMoves: a host with more moves in flight (in + out, planned by a
	// partition or migrating) is avoided.
	MaxMoves int
	// NovaWeight weighs Nova's own weight (normalized to [0, 1] among the
	// candidates) against the headroom (fraction of capacity).
	NovaWeight float64
	// DropAvoided drops avoided hosts from the answer instead of putting
	// them last (never all of them: a boot is never failed by dvms).
	DropAvoided bool
	// CPUOverload, RAMOverload: the agents' overload thresholds.
	CPUOverload, RAMOverload float64
}

// DefaultConfig returns the defaults (30 s summaries).
func DefaultConfig() Config {
	return Config{StaleAfter: 90 * time.Second, PendingTTL: 2 * time.Minute, MaxMoves: 0, NovaWeight: 0.5,
		CPUOverload: 1, RAMOverload: 1}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.StaleAfter <= 0 {
		errs = append(errs, errors.New("extsched: stale_after must be > 0"))
	}
	if c.PendingTTL < 0 {
		errs = append(errs, errors.New("extsched: pending_ttl must be >= 0"))
	}
	if c.MaxMoves < 0 {
		errs = append(errs, errors.New("extsched: max_moves_in_flight must be >= 0"))
	}
	if c.NovaWeight < 0 {
		errs = append(errs, errors.New("extsched: nova_weight must be >= 0"))
	}
	if c.CPUOverload <= 0 || c.RAMOverload <= 0 {
		errs = append(errs, errors.New("extsched: overload thresholds must be > 0"))
	}
	return errors.Join(errs...)
}

// Tier is the class of a candidate; lower tiers come first.
type Tier uint8

const (
	// Roomy: fresh summary, the flavor fits under the host's demand
	// limits; ordered by score (headroom after placing it, and Nova's weight).
	Roomy Tier = iota
	// Unknown: no summary or a stale one; Nova's order (fail-open).
	Unknown
	// Tight: fresh summary, the flavor would push measured demand over a
	// threshold; most headroom first.
	Tight
	// Avoided: draining, disabled, moves in flight beyond the limit, or
	// a member of the anti-affinity group is there; Nova's order, last
	// (or dropped).
	Avoided
)

func (t Tier) String() string {
	switch t {
	case Roomy:
		return "roomy"
	case Unknown:
		return "unknown"
	case Tight:
		return "tight"
	case Avoided:
		return "avoided"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Ranked is one candidate's place and why.
type Ranked struct {
	Host     string
	Tier     Tier
	Score    float64 // Roomy: headroom + NovaWeight × Nova's normalized weight; Tight: headroom
	Headroom float64 // fraction of capacity left after the flavor (min of CPU and RAM)
	Reason   string
	Dropped  bool
}

// Decision is the answer to one request, with its reasons.
type Decision struct {
	Hosts  []string
	Ranked []Ranked // in answer order, dropped hosts last
	// Reason says why Nova's order was kept as a whole, "" otherwise.
	Reason string
}

// Weigh orders the candidates of one request. states are the view's
// states of the candidates (View.States), in the request's order, which
// is Nova's.
func Weigh(cfg Config, spec Spec, req Request, states []HostState) Decision {
	names := make([]string, len(req.Hosts))
	for i, h := range req.Hosts {
		names[i] = h.Name()
	}
	keep := func(why string) Decision {
		d := Decision{Hosts: names, Reason: why}
		for _, h := range names {
			d.Ranked = append(d.Ranked, Ranked{Host: h, Tier: Unknown, Reason: why})
		}
		return d
	}
	switch {
	case len(names) == 0:
		return Decision{Hosts: []string{}, Reason: "no candidates"}
	case req.Rebuild:
		return keep("rebuild: Nova's order")
	case spec.GroupPolicy == "affinity" || spec.GroupPolicy == "soft-affinity":
		return keep(spec.GroupPolicy + " group: Nova's order")
	}
	lo, hi := 0.0, 0.0
	for i, h := range names {
		w := req.Weights[h]
		if i == 0 || w < lo {
			lo = w
		}
		if i == 0 || w > hi {
			hi = w
		}
	}
	norm := func(h string) float64 {
		if hi-lo <= fit.Eps {
			return 0
		}
		return (req.Weights[h] - lo) / (hi - lo)
	}
	ranked := make([]Ranked, len(names))
	for i, h := range names {
		st := HostState{Host: h}
		if i < len(states) && states[i].Host == h {
			st = states[i]
		}
		ranked[i] = rank(cfg, spec, st, norm(h))
	}
	order := make([]int, len(ranked))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := ranked[a], ranked[b]
		if ra.Tier != rb.Tier {
			return int(ra.Tier) - int(rb.Tier)
		}
		if ra.Tier == Roomy || ra.Tier == Tight {
			switch {
			case ra.Score > rb.Score+fit.Eps:
				return -1
			case rb.Score > ra.Score+fit.Eps:
				return 1
			}
		}
		return a - b // Nova's order
	})
	var d Decision
	allAvoided := ranked[order[0]].Tier == Avoided
	var dropped []Ranked
	for _, i := range order {
		r := ranked[i]
		if r.Tier == Avoided && cfg.DropAvoided && !allAvoided {
			r.Dropped = true
			dropped = append(dropped, r)
			continue
		}
		d.Hosts = append(d.Hosts, r.Host)
		d.Ranked = append(d.Ranked, r)
	}
	d.Ranked = append(d.Ranked, dropped...)
	if allAvoided {
		d.Reason = "every candidate is avoided: Nova's order"
	}
	return d
}

// rank classifies one candidate.
func rank(cfg Config, spec Spec, st HostState, novaNorm float64) Ranked {
	r := Ranked{Host: st.Host}
	s := st.Summary
	var avoid []string
	if spec.GroupPolicy == "anti-affinity" && slices.Contains(spec.GroupHosts, st.Host) {
		avoid = append(avoid, "anti-affinity: a member of the group is here")
	}
	if st.Known && st.Fresh {
		if s.Draining {
			avoid = append(avoid, "draining")
		} else if s.Disabled {
			avoid = append(avoid, "disabled")
		}
	}
	if moves := st.MovesIn + st.MovesOut; moves > cfg.MaxMoves {
		avoid = append(avoid, fmt.Sprintf("%d moves in flight (in %d, out %d) > %d", moves, st.MovesIn, st.MovesOut, cfg.MaxMoves))
	}
	if len(avoid) > 0 {
		r.Tier, r.Reason = Avoided, strings.Join(avoid, "; ")
		return r
	}
	switch {
	case !st.Known:
		r.Tier, r.Reason = Unknown, "no summary: Nova's order"
		return r
	case !st.Fresh:
		r.Tier, r.Reason = Unknown, fmt.Sprintf("summary %s old (stale after %s): Nova's order", st.Age.Round(time.Second), cfg.StaleAfter)
		return r
	case s.CPUs <= 0 || s.RAMMB <= 0:
		r.Tier, r.Reason = Unknown, "summary without capacity: Nova's order"
		return r
	}
	// The new server is assumed to use its whole flavor; boots sent here
	// recently and not in the summary yet count the same way.
	cpu := s.CPUDemand + st.PendingVCPUs + float64(spec.VCPUs)
	ram := s.RAMDemand + st.PendingRAMMB + float64(spec.RAMMB)
	lcpu, lram := s.CPUs*cfg.CPUOverload, s.RAMMB*cfg.RAMOverload
	r.Headroom = min((lcpu-cpu)/s.CPUs, (lram-ram)/s.RAMMB)
	detail := fmt.Sprintf("demand after the flavor cpu %.1f/%.1f ram %.0f/%.0f MB", cpu, lcpu, ram, lram)
	if st.PendingVCPUs > 0 || st.PendingRAMMB > 0 {
		detail += fmt.Sprintf(" (pending boots %.0f vcpus %.0f MB)", st.PendingVCPUs, st.PendingRAMMB)
	}
	if fit.Over(cpu, lcpu) || fit.Over(ram, lram) {
		r.Tier, r.Score = Tight, r.Headroom
		r.Reason = "over a threshold: " + detail
		return r
	}
	r.Tier, r.Score = Roomy, r.Headroom+cfg.NovaWeight*novaNorm
	r.Reason = fmt.Sprintf("headroom %.2f, nova weight %.2f: %s", r.Headroom, novaNorm, detail)
	return r
}
