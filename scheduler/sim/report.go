package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Report is the result of a simulation. JSON names are stable: scripts
// and the issue tracker read them.
type Report struct {
	Mode string `json:"mode"`
	// Clock is "wall" (simulated time paced by the wall clock: the
	// runtime over NATS and nova/fake) or "virtual" (scheduler/detsim's
	// discrete events: the agents' state machines without the runtime).
	Clock    string  `json:"clock"`
	Hosts    int     `json:"hosts"`
	Servers  int     `json:"servers"`
	Seed     int64   `json:"seed"`
	Workload string  `json:"workload"`
	Duration float64 `json:"duration_s"`
	WallS    float64 `json:"wall_s"`
	// Samples: the agents' demand samples of their own host from FromS
	// (the warm-up, as the nova figures: start-up reads apart) against
	// the samples due (hosts x the time since / monitor interval):
	// a ratio well under 1 says the run did not keep up (DESIGN §7), for
	// lack of CPU or because monitors waited for Nova (a refresh blocks
	// the sample). HarnessTicks, the harness's own simulated seconds
	// against the duration's, tells the first apart.
	Samples struct {
		Taken        int64   `json:"taken"`
		FromS        float64 `json:"from_s"`
		Due          int64   `json:"due"`
		Ratio        float64 `json:"ratio"`
		HarnessTicks int     `json:"harness_ticks"`
		// HarnessDue is the observer's samples due (one per simulated
		// second); MaxGapS the largest simulated time between two of
		// its samples (the run's end included).
		HarnessDue int     `json:"harness_due"`
		MaxGapS    float64 `json:"max_gap_s"`
	} `json:"samples"`
	// Valid says whether the run kept up with its clock (see validity):
	// the figures of an invalid run describe a starved simulation, not
	// DVMS. InvalidBecause says why.
	Valid          bool     `json:"valid"`
	InvalidBecause []string `json:"invalid_because,omitempty"`
	// Runtime: how late the Go runtime woke a goroutine (wall clock
	// only). With --membership swim, a tick later than half the probe
	// timeout makes the run not valid: the process, not SWIM, may have caused
	// its false deaths.
	Runtime *RuntimeReport `json:"runtime,omitempty"`

	Events struct {
		Total      int `json:"total"`
		Solved     int `json:"solved"`
		Unsolvable int `json:"unsolvable"`
		Failed     int `json:"failed"`
		Aborted    int `json:"aborted"`
		InFlight   int `json:"in_flight"`
		// UnsolvableWithGlobal counts unsolvable events for which the
		// solver, run on the whole cloud when the event ended, found a
		// solution (a liveness miss).
		UnsolvableWithGlobal int `json:"unsolvable_with_global_solution"`
		// UnsolvableWithUnion: unsolvable events the union of the
		// partitions Blocked at the time could solve as their leaders
		// last saw it (the snapshots they solved over): merges missed
		// them, a protocol miss.
		UnsolvableWithUnion int `json:"unsolvable_with_union_solution"`
		// UnsolvableWithUnionLater: the others the same hosts could
		// solve as the cloud was at the observer's next sample (demand
		// changed after the snapshots; see globalCheck).
		UnsolvableWithUnionLater int `json:"unsolvable_with_union_solution_later"`
		// UnionMisses and UnionLaterMisses name the first of each (event:
		// why given up, its partition, the partitions Blocked then).
		UnionMisses      []string `json:"union_misses,omitempty"`
		UnionLaterMisses []string `json:"union_later_misses,omitempty"`
		// AbortedBy counts aborted events by class (scheduler.EndClass:
		// vanished, skipped, partition_timeout...). AbortedChecked of them were solved on the whole
		// cloud when they ended (abortedCheckBudget: 2 a simulated second at
		// 1,000 hosts, one every 5 s at 10,000), and
		// AbortedWithGlobal had a solution there.
		AbortedBy map[string]int `json:"aborted_by_class,omitempty"`
		// EndedBy counts the ended events by outcome and class, e.g.
		// "solved/relieved", "aborted/vanished".
		EndedBy map[string]int `json:"ended_by_outcome_class,omitempty"`
		// AbortedVanished: the aborted events whose condition went away
		// by itself before anything moved for them (an overload whose
		// host's own measurement no longer shows it, a drain lifted:
		// scheduler.Vanished). Counted in Aborted and in WithSolution as
		// every aborted event is; SolvedPctExclVanished leaves them out.
		AbortedVanished int `json:"aborted_vanished"`
		// AbortedRefused: the aborted events a plan was refused for by the
		// operator's policy, not for want of one: not worth its moves
		// (move_cost) or only cooling servers could move (server_cooldown).
		// Counted in Aborted, left out of WithSolution and never checked.
		AbortedRefused    int `json:"aborted_refused"`
		AbortedChecked    int `json:"aborted_checked"`
		AbortedWithGlobal int `json:"aborted_with_global_solution"`
		// WithSolution estimates the events that had a solution: solved,
		// failed (counted as solvable), unsolvable with a global solution,
		// and the aborted ones in the proportion of the checked that had
		// one (all of them when none was checked). Events still in flight
		// at the end are left out (the run's end cut them). SolvedPct is
		// Solved over it, in percent (100 when it is 0).
		WithSolution float64 `json:"with_solution"`
		// Actions counts the executed plans' actions by outcome and
		// reason class (node.ReasonClass), e.g. "skipped/read_failed".
		Actions   map[string]int `json:"actions_by_outcome_class,omitempty"`
		SolvedPct float64        `json:"solved_of_with_solution_pct"`
		// SolvedPctExclVanished is Solved over WithSolution less the
		// vanished events (in the same proportion as the aborted ones
		// counted there): the events that needed dvms. SolvedPct, with
		// them, is the raw figure.
		SolvedPctExclVanished float64 `json:"solved_of_with_solution_excl_vanished_pct"`
		// Replans counts plans solved again in their partition after the
		// executor's re-checks skipped actions while the event still
		// held (scheduler.Agent.PlanSkipped); SolvedAfterReplan the
		// events that ended solved after one.
		Replans           int `json:"replans"`
		SolvedAfterReplan int `json:"solved_after_replan"`
	} `json:"events"`
	// SolveMS is detection to plan in wall milliseconds; ProtocolMS the
	// same in simulated time (what the protocol's timeouts see: message
	// and Nova latencies at the run's time scale); SolverMS the solver's
	// own time per solve (wall, every solve, first or not).
	SolveMS    Percentiles `json:"solve_ms"`
	ProtocolMS Percentiles `json:"protocol_ms"`
	SolverMS   Percentiles `json:"solver_cpu_ms"`
	Migrations struct {
		Total  int `json:"total"`
		Failed int `json:"failed"`
		// OfNewServers: live migrations of the servers booted during
		// the run (--arrivals).
		OfNewServers int `json:"of_new_servers"`
		// InterSite: live migrations done between two sites (--sites);
		// InterSiteSiteSolvable: those of events whose initiator's site
		// alone had a solution when the plan was made (the solver over
		// every host of that site); SiteChecksLost: plans not checked
		// (the harness's queue was full).
		InterSite             int   `json:"inter_site"`
		InterSiteSiteSolvable int   `json:"inter_site_with_site_solution"`
		SiteChecksLost        int64 `json:"site_checks_lost,omitempty"`
	} `json:"migrations"`
	// Arrivals: servers booted during the run (--arrivals) and how their
	// hosts were chosen.
	Arrivals struct {
		Rate     float64 `json:"rate"`
		Weights  string  `json:"weights,omitempty"`
		Booted   int     `json:"booted"`
		Unplaced int     `json:"unplaced"` // no host had placement room
		Moved    int     `json:"moved"`    // booted servers moved at least once
	} `json:"arrivals"`
	OverloadSeconds float64 `json:"overload_seconds"`
	// Oscillations: hosts relieved again and again, servers moved back,
	// and the server cooldown's check (region-wide, oscillate.go).
	Oscillations *Oscillations `json:"oscillations,omitempty"`
	// OverloadBreakdown splits OverloadSeconds (the virtual clock only).
	OverloadBreakdown *OverloadSplit `json:"overload_breakdown,omitempty"`
	Partitions        struct {
		MaxSize  int     `json:"max_size"`
		MeanSize float64 `json:"mean_size"`
	} `json:"partitions"`
	Merges struct {
		Committed int `json:"committed"`
		Refused   int `json:"refused"`
	} `json:"merges"`
	Messages struct {
		Total    int     `json:"total"`
		PerEvent float64 `json:"per_event"`
		Dropped  int64   `json:"dropped"`
		// InterSite: protocol messages between agents of two sites.
		InterSite int64 `json:"inter_site"`
	} `json:"messages"`
	// Sites: --sites, --site-rtt and --next-node.
	Sites struct {
		N        int     `json:"n"`
		IntraMS  float64 `json:"intra_rtt_ms"`
		InterMS  float64 `json:"inter_rtt_ms"`
		NextNode string  `json:"next_node"`
	} `json:"sites"`
	// Coordinates: the agents' Vivaldi coordinates at the end of the run
	// (with --sites > 1 or --next-node vivaldi): the median relative
	// error of the estimated RTT against the modelled one over pairs of
	// hosts, the fraction of agents whose coordinate is used (error
	// estimate below the threshold), RTT samples per agent.
	Coordinates struct {
		MedianRelError  float64 `json:"median_rel_error"`
		Pairs           int     `json:"pairs"`
		Converged       float64 `json:"converged"`
		SamplesPerAgent float64 `json:"samples_per_agent"`
		// WarmupS: simulated seconds the coordinates probed before the
		// agents started (SitesConfig.Warmup).
		WarmupS float64 `json:"warmup_s"`
	} `json:"coordinates"`
	Agents struct {
		Killed int `json:"killed"`
	} `json:"agents"`
	// Byzantine: the adversaries (--byzantine) and the honest agents'
	// bounds on one key (mode dvms, wall clock).
	Byzantine *ByzantineReport `json:"byzantine,omitempty"`
	// Membership: the SWIM membership's cost and detection (with
	// --membership swim; the ideal detector has none to report).
	Membership *MembershipReport `json:"membership,omitempty"`
	Faults     struct {
		Injected int `json:"injected"`
	} `json:"faults"`
	Safety struct {
		Violations  int `json:"violations"`
		ServersLost int `json:"servers_lost"`
		// DemandDrift counts destinations found overloaded at a
		// migration's start because the workload changed demand after
		// the executor's re-check (not counted as violations).
		DemandDrift       int      `json:"demand_drift"`
		Descriptions      []string `json:"descriptions,omitempty"`
		DriftDescriptions []string `json:"drift_descriptions,omitempty"`
	} `json:"safety"`

	// Nova is what the agents (or the central baseline) cost the
	// simulated Nova and placement, as nova/openstack would send it.
	Nova NovaCost `json:"nova"`

	// Series sampled every simulated second, for the chart.
	Series []Sample `json:"-"`
}

// NovaCost is the nova section of a report.
type NovaCost struct {
	Requests struct {
		Total  int64 `json:"total"`
		Errors int64 `json:"errors"`
		// ByTemplate: the ten most frequent request templates.
		ByTemplate []TemplateCount `json:"by_template"`
	} `json:"requests"`
	// PerHostMinute is every request of the run over hosts x minutes
	// (comparable between dvms and the central baseline).
	PerHostMinute float64 `json:"requests_per_host_minute"`
	// PerAgentMinute: an agent's requests while in no partition (no plan
	// running) over the agent-minutes in that state, and the rest over
	// theirs, counted from FromS (the start-up reads are StartupRequests);
	// the region's watch is apart.
	PerAgentMinute struct {
		AtRest                   float64 `json:"at_rest"`
		DuringEvents             float64 `json:"during_events"`
		AgentMinutesAtRest       float64 `json:"agent_minutes_at_rest"`
		AgentMinutesDuringEvents float64 `json:"agent_minutes_during_events"`
		FromS                    float64 `json:"from_s"`
		// The largest templates of each, per agent-minute.
		AtRestByTemplate       []TemplateRate `json:"at_rest_by_template"`
		DuringEventsByTemplate []TemplateRate `json:"during_events_by_template"`
	} `json:"requests_per_agent_minute"`
	StartupRequests int64 `json:"startup_requests"`
	// RegionWatch: the region's maintenance watch (GET
	// /os-services?binary=nova-compute, one agent of the region).
	RegionWatch struct {
		Requests  int64   `json:"requests"`
		PerMinute float64 `json:"per_minute"`
	} `json:"region_watch"`
	// AfterWarmup: the requests from PerAgentMinute.FromS to the end (the
	// start-up reads left out, the region's watch and the at-rest reads
	// in): how many, per simulated second, and their latency (simulated
	// ms). On a capped API the start-up storm (every agent's first reads
	// at once) dominates P50MS and P99MS below; this is the API as the
	// events saw it.
	AfterWarmup struct {
		Requests  int64   `json:"requests"`
		PerSecond float64 `json:"per_second"`
		P50MS     float64 `json:"p50_ms"`
		P99MS     float64 `json:"p99_ms"`
	} `json:"after_warmup"`
	// Latency of the requests as the callers saw it (simulated ms).
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// APIRPS is the API's capacity (0: unlimited); when capped, Queued
	// requests waited for their turn, the longest QueueMaxMS.
	APIRPS     float64 `json:"api_rps"`
	Queued     int64   `json:"queued,omitempty"`
	QueueMaxMS float64 `json:"queue_max_ms,omitempty"`
	// Modelled (the virtual clock): the requests are the nova.Client
	// calls the runtime's decisions make, counted (scheduler/detsim),
	// priced by nova/fake's cost model with warm caches and passed through
	// its model of the API (latency, queue; no faults). ByCall has them
	// per call (startup included), and their rate over the run.
	Modelled bool       `json:"modelled,omitempty"`
	ByCall   []CallRate `json:"by_call,omitempty"`
}

// CallRate is one nova.Client call's count, its requests and their rate
// (requests per simulated second).
type CallRate struct {
	Call      string  `json:"call"`
	Calls     int64   `json:"calls"`
	Requests  int64   `json:"requests"`
	PerSecond float64 `json:"per_second"`
}

// withSolution fills Events.WithSolution and SolvedPct (see Report).
func (r *Report) withSolution() {
	e := &r.Events
	share := 1.0 // of the aborted events, those counted as having had a solution
	if e.AbortedChecked > 0 {
		share = float64(e.AbortedWithGlobal) / float64(e.AbortedChecked)
	}
	e.WithSolution = round(float64(e.Solved+e.Failed+e.UnsolvableWithGlobal) + float64(e.Aborted-e.AbortedRefused)*share)
	e.SolvedPct = pct(e.Solved, e.WithSolution)
	e.SolvedPctExclVanished = pct(e.Solved, e.WithSolution-float64(e.AbortedVanished)*share)
}

// pct is n over of in percent (100 when of is 0).
func pct(n int, of float64) float64 {
	if of <= 0 {
		return 100
	}
	return round(100 * float64(n) / of)
}

// TemplateRate is a template's requests per agent-minute.
type TemplateRate struct {
	Template       string  `json:"template"`
	PerAgentMinute float64 `json:"per_agent_minute"`
}

// TemplateCount is how many requests of one template were sent.
type TemplateCount struct {
	Template string `json:"template"`
	Count    int64  `json:"count"`
	Errors   int64  `json:"errors,omitempty"`
}

// OverloadSplit splits a run's overload host-seconds by what the host's
// agent was doing: InEvent, an event of the host was in flight (from
// detection to the end of its plan); NoEvent, none was (before K-of-N
// fired, transient overloads, backoff after an event not solved, a host
// another partition's plan uses).
type OverloadSplit struct {
	NoEvent float64 `json:"no_event"`
	InEvent float64 `json:"in_event"`
}

// Percentiles of a distribution in milliseconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return round(s[max(0, min(i, len(s)-1))])
	}
	return Percentiles{Count: len(s), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: round(s[len(s)-1])}
}

func round(f float64) float64 { return math.Round(f*100) / 100 }

// Sample is one point of the time series.
type Sample struct {
	T          float64 // simulated seconds
	Overloaded int
	InFlight   int // events in flight
	Migrating  int
}

// Validity thresholds: a run is valid when the observer took at least
// minObserved of its samples, never went more than maxGap without one,
// and (dvms) the agents took at least minSampled of theirs. A gap longer
// than a few monitor samples delays detection (K of N) by the harness's
// doing, not the protocol's.
const (
	minObserved = 0.9
	minSampled  = 0.9
	maxGap      = 5.0 // simulated seconds
)

// validity fills Valid and InvalidBecause from the samples.
func (r *Report) validity() {
	r.InvalidBecause = nil
	if due := r.Samples.HarnessDue; due > 0 && float64(r.Samples.HarnessTicks) < minObserved*float64(due) {
		r.InvalidBecause = append(r.InvalidBecause, fmt.Sprintf("the observer took %d of %d samples due (under %.0f%%)", r.Samples.HarnessTicks, due, 100*minObserved))
	}
	if r.Samples.MaxGapS > maxGap {
		r.InvalidBecause = append(r.InvalidBecause, fmt.Sprintf("the observer went %.1f s of simulated time without a sample (over %.0f s)", r.Samples.MaxGapS, maxGap))
	}
	if r.Samples.Due > 0 && r.Samples.Ratio < minSampled {
		r.InvalidBecause = append(r.InvalidBecause, fmt.Sprintf("the agents took %d of %d samples due (under %.0f%%)", r.Samples.Taken, r.Samples.Due, 100*minSampled))
	}
	if r.Membership != nil && r.Membership.Kind == MembershipSwim {
		if why := r.Runtime.starved(); why != "" {
			r.InvalidBecause = append(r.InvalidBecause, why)
		}
	}
	r.Valid = len(r.InvalidBecause) == 0
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes a short human summary.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "dvms simulate (%s): %d hosts, %d servers, workload %s, seed %d, %.0fs simulated in %.1fs\n",
		r.Mode, r.Hosts, r.Servers, r.Workload, r.Seed, r.Duration, r.WallS)
	validity := "valid"
	if !r.Valid {
		validity = "NOT VALID: " + strings.Join(r.InvalidBecause, "; ")
	}
	fmt.Fprintf(w, "  run         %s; observer took %d of %d samples due, largest gap %.1f s\n", validity, r.Samples.HarnessTicks, r.Samples.HarnessDue, r.Samples.MaxGapS)
	if rt := r.Runtime; rt != nil {
		fmt.Fprintf(w, "  runtime     a goroutine woken every %.0f ms ran late by p50 %.0f ms  p99 %.0f ms  max %.0f ms (%.0f s after the start; %.0f ms at most during the warm-up); %d of %d ticks over %.0f ms\n",
			rt.TickMS, rt.TickLagP50MS, rt.TickLagP99MS, rt.TickLagMaxMS, rt.TickLagMaxAtS, rt.TickLagMaxWarmupMS, rt.TicksLateOver, rt.Ticks, rt.LateOverMS)
	}
	if r.Samples.Due > 0 {
		fmt.Fprintf(w, "  kept up     agents took %d of %d samples due from %.0fs (%.2f)\n", r.Samples.Taken, r.Samples.Due, r.Samples.FromS, r.Samples.Ratio)
	}
	fmt.Fprintf(w, "  events      %d total: %d solved, %d unsolvable (%d had a global solution, %d one in the union of the blocked partitions as they saw it, %d as the cloud was a moment later), %d failed, %d aborted, %d in flight\n",
		r.Events.Total, r.Events.Solved, r.Events.Unsolvable, r.Events.UnsolvableWithGlobal, r.Events.UnsolvableWithUnion, r.Events.UnsolvableWithUnionLater, r.Events.Failed, r.Events.Aborted, r.Events.InFlight)
	fmt.Fprintf(w, "  solved      %.1f %% of the %.0f events that had a solution (aborted ones estimated from the checked)\n", r.Events.SolvedPct, r.Events.WithSolution)
	if r.Events.AbortedVanished > 0 {
		fmt.Fprintf(w, "              %.1f %% without the %d aborted events whose condition vanished by itself before anything moved\n", r.Events.SolvedPctExclVanished, r.Events.AbortedVanished)
	}
	if r.Events.AbortedRefused > 0 {
		fmt.Fprintf(w, "              not counting the %d aborted events the move cost or the server cooldown refused a plan for\n", r.Events.AbortedRefused)
	}
	if r.Events.Replans > 0 {
		fmt.Fprintf(w, "  re-plans    %d after skipped actions; %d events solved after one\n", r.Events.Replans, r.Events.SolvedAfterReplan)
	}
	if r.Events.Aborted > 0 {
		fmt.Fprintf(w, "  aborted     %d of %d checked had a global solution; by class:\n", r.Events.AbortedWithGlobal, r.Events.AbortedChecked)
		reasons := slices.Sorted(maps.Keys(r.Events.AbortedBy))
		slices.SortStableFunc(reasons, func(a, b string) int { return r.Events.AbortedBy[b] - r.Events.AbortedBy[a] })
		for _, k := range reasons {
			fmt.Fprintf(w, "              %8d  %s\n", r.Events.AbortedBy[k], k)
		}
	}
	if len(r.Events.EndedBy) > 0 {
		classes := slices.Sorted(maps.Keys(r.Events.EndedBy))
		slices.SortStableFunc(classes, func(a, b string) int { return r.Events.EndedBy[b] - r.Events.EndedBy[a] })
		parts := make([]string, len(classes))
		for i, k := range classes {
			parts[i] = fmt.Sprintf("%s %d", k, r.Events.EndedBy[k])
		}
		fmt.Fprintf(w, "  ended by    %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  solve time  p50 %.1f ms  p95 %.1f ms  p99 %.1f ms  max %.1f ms (%d plans)\n",
		r.SolveMS.P50, r.SolveMS.P95, r.SolveMS.P99, r.SolveMS.Max, r.SolveMS.Count)
	fmt.Fprintf(w, "              simulated p50 %.1f ms  p99 %.1f ms; the solver's own time p50 %.1f ms  p99 %.1f ms (%d solves)\n",
		r.ProtocolMS.P50, r.ProtocolMS.P99, r.SolverMS.P50, r.SolverMS.P99, r.SolverMS.Count)
	fmt.Fprintf(w, "  migrations  %d (%d failed)   overload %.0f host-seconds\n", r.Migrations.Total, r.Migrations.Failed, r.OverloadSeconds)
	if o := r.Oscillations; o != nil {
		fmt.Fprintf(w, "  oscillations  %d host(s) relieved %d times within %.0f min (%d detections), %d server(s) moved back, %d moved again within the window; server_cooldown %.0f s: %d violation(s)\n",
			o.Hosts, o.Events, o.WindowS/60, o.HostRelieved, o.ServerMovedBack, o.MovedAgain, o.CooldownS, o.CooldownViolations)
	}
	if r.Arrivals.Rate > 0 {
		fmt.Fprintf(w, "  arrivals    %d booted (%.2f/s, %s weights, %d unplaced): %d of them moved later, %d live migrations of new servers\n",
			r.Arrivals.Booted, r.Arrivals.Rate, r.Arrivals.Weights, r.Arrivals.Unplaced, r.Arrivals.Moved, r.Migrations.OfNewServers)
	}
	fmt.Fprintf(w, "  partitions  max %d  mean %.2f   merges %d committed, %d refused\n",
		r.Partitions.MaxSize, r.Partitions.MeanSize, r.Merges.Committed, r.Merges.Refused)
	fmt.Fprintf(w, "  messages    %d (%.1f per event, %d dropped)   agents killed %d   faults injected %d\n",
		r.Messages.Total, r.Messages.PerEvent, r.Messages.Dropped, r.Agents.Killed, r.Faults.Injected)
	if m := r.Membership; m != nil {
		fmt.Fprintf(w, "  membership  %s at %.0f %% loss: %.2f messages per agent per second (%.2f while joining, a warm-up of %.0f s, converged %t); killed agents detected p50 %.1f s  p99 %.1f s  max %.1f s (%d pairs, %d missed, %d late); %d live agents reported down (%d reports, %d in the warm-up); every agent saw every other up at %.0f s; %d datagrams lost to full buffers, %d gossip messages to full handler queues\n",
			m.Kind, m.Drop*100, m.MsgsPerAgentS, m.JoinMsgsPerAgentS, m.WarmupS, m.Converged, m.DetectP50S, m.DetectP99S, m.DetectMaxS, m.Detections, m.Missed, m.Late, m.FalseDeaths, m.FalseDeathReports,
			m.FalseDeathReportsWarmup, m.FullViewS, m.Overflow, m.QueueFullDrops)
	}
	if r.Sites.N > 1 || r.Sites.NextNode == "vivaldi" {
		fmt.Fprintf(w, "  sites       %d (RTT %.1f ms inside, %.1f ms between), next node %s: %d inter-site migrations (%d of events their initiator's site could solve), %d inter-site messages\n",
			r.Sites.N, r.Sites.IntraMS, r.Sites.InterMS, r.Sites.NextNode, r.Migrations.InterSite, r.Migrations.InterSiteSiteSolvable, r.Messages.InterSite)
		fmt.Fprintf(w, "  coordinates median relative RTT error %.3f over %d pairs, %.2f of agents converged, %.0f samples per agent (after a warm-up of %.0f s)\n",
			r.Coordinates.MedianRelError, r.Coordinates.Pairs, r.Coordinates.Converged, r.Coordinates.SamplesPerAgent, r.Coordinates.WarmupS)
	}
	n := r.Nova
	capacity := "unlimited API"
	if n.APIRPS > 0 {
		capacity = fmt.Sprintf("API capped at %.0f req/s: %d queued, longest wait %.0f ms", n.APIRPS, n.Queued, n.QueueMaxMS)
	}
	fmt.Fprintf(w, "  nova        %d requests (%d errors, %.2f per host-minute), latency p50 %.1f ms p99 %.1f ms, %s\n",
		n.Requests.Total, n.Requests.Errors, n.PerHostMinute, n.P50MS, n.P99MS, capacity)
	fmt.Fprintf(w, "              per agent-minute from %.0fs: %.2f at rest (%.0f agent-min), %.2f during events (%.0f agent-min); start-up %d; region watch %d (%.1f/min)\n",
		n.PerAgentMinute.FromS, n.PerAgentMinute.AtRest, n.PerAgentMinute.AgentMinutesAtRest, n.PerAgentMinute.DuringEvents,
		n.PerAgentMinute.AgentMinutesDuringEvents, n.StartupRequests, n.RegionWatch.Requests, n.RegionWatch.PerMinute)
	fmt.Fprintf(w, "              after the warm-up: %d requests, %.1f per second, latency p50 %.1f ms p99 %.1f ms\n",
		n.AfterWarmup.Requests, n.AfterWarmup.PerSecond, n.AfterWarmup.P50MS, n.AfterWarmup.P99MS)
	for _, t := range n.Requests.ByTemplate {
		fmt.Fprintf(w, "              %8d  %s\n", t.Count, t.Template)
	}
	if n.Modelled {
		fmt.Fprintf(w, "              modelled (virtual clock: the runtime's calls priced by nova/fake, warm caches, its API's latency and queue, no faults):\n")
		for _, c := range n.ByCall {
			fmt.Fprintf(w, "              %8d  %-22s %8d requests  %8.2f/s\n", c.Calls, c.Call, c.Requests, c.PerSecond)
		}
	}
	if b := r.Byzantine; b != nil {
		fmt.Fprintf(w, "  byzantine   %d adversaries: %d forged events (%d MAINTENANCE of honest hosts), %d partitions taken over, %d holding heartbeats; "+
			"honest agents' bounds dropped %d messages (%d refused keys' partitions, %d past the sender rate); %d honest events held past one partition timeout, %d partitions left for a refused leader (their events went on under their own id), %d events ended leader_refused; %d servers moved off an honest host for a forged event; "+
			"%d violations onto an adversary's host (it under-reported its demand); %d adversaries caught under-reporting a server they received (%d blames), %d honest hosts distrusted; %d adversaries and %d honest hosts judged implausible as a destination; longest honest lead outside a plan %.0f s\n",
			b.Hosts, b.Forged, b.Maintenance, b.Takeovers, b.Heartbeats, b.DroppedRefused+b.DroppedRate, b.DroppedRefused, b.DroppedRate, b.EventsHeld, b.LeftRefused, b.LeaderRefused, b.MovedWithoutConsent,
			b.OntoAdversary, b.Distrusted, b.Blames, b.FalseBlames, b.Implausible, b.FalseImplausible, b.LongestHonestLeadS)
	}
	fmt.Fprintf(w, "  safety      %d violations, %d servers lost (%d destinations overloaded by demand drift after re-check)\n", r.Safety.Violations, r.Safety.ServersLost, r.Safety.DemandDrift)
	for _, d := range r.Safety.Descriptions {
		fmt.Fprintf(w, "    - %s\n", d)
	}
}

// WriteSVG draws overloaded hosts and events in flight over time.
func (r *Report) WriteSVG(w io.Writer) error { return r.WriteChart(w, nil, "") }

// WriteChart is WriteSVG with the oracle's overloaded hosts (oracle: its
// run of the same cloud, nil for none) and a caption line (the verdict;
// "" for none) under the title.
func (r *Report) WriteChart(w io.Writer, oracle *Report, caption string) error {
	const W, L, B = 900, 60, 40
	T, H := 40, 360
	if caption != "" {
		T, H = 60, 380
	}
	pw, ph := float64(W-L-20), float64(H-T-B)
	maxT, maxY := 1.0, 1
	for _, s := range r.Series {
		maxT = math.Max(maxT, s.T)
		maxY = max(maxY, s.Overloaded, s.InFlight, s.Migrating)
	}
	if oracle != nil {
		for _, s := range oracle.Series {
			maxY = max(maxY, s.Overloaded)
		}
	}
	x := func(t float64) float64 { return float64(L) + min(t, maxT)/maxT*pw }
	y := func(v int) float64 { return float64(T) + ph - float64(v)/float64(maxY)*ph }
	line := func(series []Sample, get func(Sample) int) string {
		var b strings.Builder
		for i, s := range series {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(s.T), y(get(s)))
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	// The solve time is a wall-clock sample only on the wall clock; the
	// virtual clock's report has none to show.
	solve := ""
	if r.SolveMS.P50 > 0 {
		solve = fmt.Sprintf(", solve p50 %.1f ms", r.SolveMS.P50)
	}
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">dvms simulate: %d hosts, %d servers, %s, seed %d — overload %.0f host-s%s</text>`+"\n",
		L, r.Hosts, r.Servers, xmlEscape(r.Workload), r.Seed, r.OverloadSeconds, solve)
	if caption != "" {
		fmt.Fprintf(&b, `<text x="%d" y="40" font-size="11">%s</text>`+"\n", L, xmlEscape(caption))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", L, float64(T)+ph, float64(L)+pw, float64(T)+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.0f" stroke="black"/>`+"\n", L, T, L, float64(T)+ph)
	for i := 0; i <= 4; i++ {
		v := maxY * i / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%d</text>`+"\n", L-5, y(v)+4, v)
		tt := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%.0fs</text>`+"\n", x(tt), H-B+18, tt)
	}
	series := []struct {
		name, color, dash string
		samples           []Sample
		get               func(Sample) int
	}{
		{"overloaded hosts", "#d62728", "", r.Series, func(s Sample) int { return s.Overloaded }},
		{"events in flight", "#1f77b4", "", r.Series, func(s Sample) int { return s.InFlight }},
		{"migrations running", "#2ca02c", "", r.Series, func(s Sample) int { return s.Migrating }},
	}
	if oracle != nil {
		series = append(series, struct {
			name, color, dash string
			samples           []Sample
			get               func(Sample) int
		}{"oracle's overloaded hosts", "#7f7f7f", ` stroke-dasharray="4 3"`, oracle.Series, func(s Sample) int { return s.Overloaded }})
	}
	for i, s := range series {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", s.color, s.dash, line(s.samples, s.get))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			L+20+i*190, H-12, s.color, L+36+i*190, H-8, s.name)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
