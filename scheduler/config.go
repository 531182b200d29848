package scheduler

// Config of one agent: thresholds, debounce, timeouts, limits.

import (
	"errors"
	"fmt"
	"time"
)

// Config configures one agent. Durations are in agent time (what Tick
// and Observe carry).
type Config struct {
	// ID is the agent's host name.
	ID string
	// Incarnation makes event and partition ids unique across restarts
	// (the runtime draws it at start).
	Incarnation string
	Thresholds  Thresholds
	// Underload enables UNDERLOAD events (consolidation).
	Underload bool
	// ConsolidationCooldown: a server that arrived on a host less than
	// this long ago is settling; consolidation does not move it, so a
	// host that just received servers (from an overload) is not emptied
	// back at once (ping-pong).
	ConsolidationCooldown time.Duration
	// ServerCooldown: a server dvms moved onto this host less than this
	// long ago is cooling (Server.Cooling); no relief or consolidation
	// moves it again (a drain does), so no server goes back and forth
	// while demand flaps. 0 (the default) turns it off: with fewer
	// servers to choose from, more partitions tour the ring for a
	// destination under saturation; ConsolidationCooldown already keeps
	// consolidation from undoing relief.
	ServerCooldown time.Duration
	// MoveCost and MoveCostPerSecond price relief's and consolidation's
	// moves (Problem.MoveCost, movecost.go): a plan whose moves cost more
	// points than it gains is refused. Both 0 (the default): off.
	MoveCost, MoveCostPerSecond float64
	// DestinationPeakWindow: the agent keeps, per server, its highest
	// demand measured this long back (Server.PeakCPU, PeakRAM), and the
	// solver judges destinations by their servers' peaks plus the
	// incoming server's (peak.go); a moved server's profile goes with
	// it to its destination's agent. 0 (the default): destinations are
	// judged by demand now.
	DestinationPeakWindow time.Duration
	// ConsolidationHeadroom is the fraction of a destination's demand
	// limits that consolidation leaves free, so demand that wobbles does
	// not make its destination the next overload. In [0, 1).
	ConsolidationHeadroom float64
	// ReliefHeadroom and ReliefPartition: a partition relieving an
	// overload first asks for destinations that keep ReliefHeadroom of
	// their demand limits free, growing for them while it has fewer than
	// ReliefPartition hosts and every member is in one availability zone
	// (Host.Zone); at that size, past that zone, or once it has toured
	// the ring or re-plans, any destination that fits. A partition of two has one
	// candidate, often the next host to overload: a few more candidates
	// (as in "the power of d choices") relieve onto a host with room, at
	// the cost of more messages per event. ReliefHeadroom 0 turns it off.
	ReliefHeadroom  float64
	ReliefPartition int
	// Windows: when each event kind may be raised (window.go); the zero
	// value is always.
	Windows Windows
	// K of the last N samples must hold for OVERLOAD/UNDERLOAD to fire.
	K, N int
	// PartitionTimeout: a member that hears nothing from its leader for
	// this long dissolves the partition (DESIGN §5.6).
	PartitionTimeout time.Duration
	// SnapshotTimeout: members that have not sent their snapshot by then
	// are dropped from the partition.
	SnapshotTimeout time.Duration
	// ProgressTimeout and HopTimeout: a leader whose request neither
	// found a node nor came back for ProgressTimeout plus HopTimeout for
	// every node outside its partition dissolves (the request was lost).
	// A request crosses one busy partition per hop, so when most nodes are
	// busy alone a tour makes about as many hops as there are nodes.
	ProgressTimeout time.Duration
	HopTimeout      time.Duration
	// RetryBackoff and MaxRetryBackoff space retries of an event whose
	// partition did not solve it.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// Lease of a Blocked partition's registration with the arbiter.
	Lease time.Duration
	// Preempt enables shelving lowest-priority servers (DESIGN §6).
	Preempt bool
	Limits  Limits
	// SolveTimeout is the solver's hard time limit.
	SolveTimeout time.Duration
	// NextNode is the next-node policy (DESIGN §5.3): NextRing (the ring
	// successor) or NextVivaldi (closest to the initiator first, by
	// Distance; the ring while distances are unknown and among equals).
	NextNode string
	// Distance estimates RTTs between hosts for NextVivaldi; the runtime
	// supplies it (Vivaldi coordinates), the agent never measures.
	Distance DistanceFunc
}

// DefaultConfig returns DESIGN's defaults for host id.
func DefaultConfig(id string) Config {
	return Config{
		ID: id, Thresholds: DefaultThresholds(), K: 3, N: 5,
		PartitionTimeout: 3500 * time.Millisecond, SnapshotTimeout: 1500 * time.Millisecond,
		ProgressTimeout: 5 * time.Second, HopTimeout: 50 * time.Millisecond, RetryBackoff: 5 * time.Second, MaxRetryBackoff: 60 * time.Second,
		Lease: 10 * time.Second, Limits: DefaultLimits(), SolveTimeout: 200 * time.Millisecond,
		ConsolidationCooldown: 10 * time.Minute, ConsolidationHeadroom: 0.1, NextNode: NextRing,
		ReliefHeadroom: 0.4, ReliefPartition: 12,
	}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("agent id (host) is required"))
	}
	if err := c.Thresholds.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.N < 1 || c.K < 1 || c.K > c.N {
		errs = append(errs, fmt.Errorf("debounce K=%d of N=%d: need 1 <= K <= N", c.K, c.N))
	}
	for name, d := range map[string]time.Duration{
		"partition_timeout": c.PartitionTimeout, "snapshot_timeout": c.SnapshotTimeout,
		"progress_timeout": c.ProgressTimeout, "retry_backoff": c.RetryBackoff, "lease": c.Lease,
		"solve_timeout": c.SolveTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0", name))
		}
	}
	if c.HopTimeout < 0 {
		errs = append(errs, errors.New("hop_timeout must be >= 0"))
	}
	if c.ConsolidationCooldown < 0 {
		errs = append(errs, errors.New("consolidation_cooldown must be >= 0"))
	}
	if c.DestinationPeakWindow < 0 {
		errs = append(errs, errors.New("destination_peak_window must be >= 0"))
	}
	if c.ServerCooldown < 0 {
		errs = append(errs, errors.New("server_cooldown must be >= 0"))
	}
	if !(c.MoveCost >= 0) || !(c.MoveCostPerSecond >= 0) {
		errs = append(errs, fmt.Errorf("move_cost %v and move_cost_per_second %v must be >= 0", c.MoveCost, c.MoveCostPerSecond))
	}
	if !(c.ReliefHeadroom >= 0 && c.ReliefHeadroom < 1) {
		errs = append(errs, fmt.Errorf("relief_headroom %v must be in [0, 1)", c.ReliefHeadroom))
	}
	if c.ReliefHeadroom > 0 && c.ReliefPartition < 2 {
		errs = append(errs, fmt.Errorf("relief_partition %d must be >= 2 with relief_headroom > 0", c.ReliefPartition))
	}
	if !(c.ConsolidationHeadroom >= 0 && c.ConsolidationHeadroom < 1) {
		errs = append(errs, fmt.Errorf("consolidation_headroom %v must be in [0, 1)", c.ConsolidationHeadroom))
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, errors.New("max_retry_backoff must be >= retry_backoff"))
	}
	switch c.NextNode {
	case NextRing, "":
	case NextVivaldi:
		if c.Distance == nil {
			errs = append(errs, errors.New("next_node vivaldi needs a distance estimate (the runtime's coordinates)"))
		}
	default:
		errs = append(errs, fmt.Errorf("next_node %q: want %s or %s", c.NextNode, NextRing, NextVivaldi))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
