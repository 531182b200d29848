package extsched

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Summary is what the agent of one host tells the region about it, on
// bus.SummarySubject at a low rate and when it changes. Everything comes
// from the agent's cached view (no Nova request): demand from its last
// sample, capacity and usage from its last placement read.
type Summary struct {
	V    int    `json:"v"`
	Host string `json:"host"`
	Site string `json:"site,omitempty"`
	// At is when the agent published it (the agent's clock); Seq orders
	// an agent's summaries (a restarted agent starts again at 1).
	At  time.Time `json:"at"`
	Seq uint64    `json:"seq"`
	// SampledAt is when the agent last sampled its host (its clock).
	SampledAt time.Time `json:"sampled_at"`
	// Measured demand of the host's servers: cores, MB.
	CPUDemand float64 `json:"cpu_demand"`
	RAMDemand float64 `json:"ram_demand_mb"`
	// Physical capacity: cores, MB.
	CPUs  float64 `json:"cpus"`
	RAMMB float64 `json:"ram_mb"`
	// Placement: allocatable and used, as of the agent's last read.
	AllocVCPUs float64 `json:"alloc_vcpus"`
	AllocRAMMB float64 `json:"alloc_ram_mb"`
	UsedVCPUs  float64 `json:"used_vcpus"`
	UsedRAMMB  float64 `json:"used_ram_mb"`
	Servers    int     `json:"servers"`
	// Disabled: the nova-compute service is disabled or down; Draining:
	// disabled for maintenance (dvms empties it).
	Disabled bool `json:"disabled,omitempty"`
	Draining bool `json:"draining,omitempty"`
	// Partition is the state of the dvms partition the host is in
	// ("growing", "blocked", "finishing"), "" when free.
	Partition string `json:"partition,omitempty"`
	// MovesOut: servers of the host with a migration task in flight, as
	// the agent's view last listed them.
	MovesOut int `json:"moves_out,omitempty"`
	// PlanMoves: moves of the plan this agent executes (it leads a
	// partition), planned or in flight, by host. The view adds those of
	// every agent.
	PlanMoves map[string]Moves `json:"plan_moves,omitempty"`
}

// Moves counts moves into and out of a host.
type Moves struct {
	In  int `json:"in"`
	Out int `json:"out"`
}

// Encode encodes s (version 1).
func (s Summary) Encode() ([]byte, error) {
	s.V = 1
	return json.Marshal(s)
}

// DecodeSummary decodes a summary and checks it is usable.
func DecodeSummary(data []byte) (Summary, error) {
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return Summary{}, fmt.Errorf("extsched: summary: %w", err)
	}
	var errs []error
	if s.V != 1 {
		errs = append(errs, fmt.Errorf("version %d, want 1", s.V))
	}
	if s.Host == "" {
		errs = append(errs, errors.New("no host"))
	}
	if s.At.IsZero() {
		errs = append(errs, errors.New("no time"))
	}
	if s.CPUs < 0 || s.RAMMB < 0 || s.CPUDemand < 0 || s.RAMDemand < 0 {
		errs = append(errs, errors.New("negative capacity or demand"))
	}
	if err := errors.Join(errs...); err != nil {
		return Summary{}, fmt.Errorf("extsched: summary of %q: %w", s.Host, err)
	}
	return s, nil
}

// Changed reports whether b says something a scheduler should hear at
// once, compared with a: state, moves, or demand or usage moved by more
// than frac of the host's capacity.
func Changed(a, b Summary, frac float64) bool {
	if a.Host != b.Host || a.Disabled != b.Disabled || a.Draining != b.Draining || a.Partition != b.Partition ||
		a.MovesOut != b.MovesOut || a.Servers != b.Servers || a.CPUs != b.CPUs || a.RAMMB != b.RAMMB ||
		len(a.PlanMoves) != len(b.PlanMoves) {
		return true
	}
	for h, m := range a.PlanMoves {
		if b.PlanMoves[h] != m {
			return true
		}
	}
	far := func(x, y, capacity float64) bool { return capacity > 0 && abs(x-y) > frac*capacity }
	return far(a.CPUDemand, b.CPUDemand, a.CPUs) || far(a.RAMDemand, b.RAMDemand, a.RAMMB) ||
		far(a.UsedVCPUs, b.UsedVCPUs, a.AllocVCPUs) || far(a.UsedRAMMB, b.UsedRAMMB, a.AllocRAMMB)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
