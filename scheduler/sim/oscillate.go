package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/dvms-project/dvms/scheduler/oscillation"
)

// Oscillations is the report's region-wide count of a rebalancer going
// back and forth (the agents' own reports, scheduler/oscillation, see
// only what each agent saw), and the server cooldown's check.
type Oscillations struct {
	// WindowS and Events: a host whose OVERLOAD events ended solved
	// Events times within WindowS oscillates (HostRelieved counts the
	// detections, one per Events reliefs, as the agents' detector does;
	// Hosts how many hosts had one).
	WindowS      float64 `json:"window_s"`
	Events       int     `json:"events"`
	HostRelieved int     `json:"host_relieved"`
	Hosts        int     `json:"hosts"`
	// ServerMovedBack: a server moved A→B, then B→A, the second move
	// starting within WindowS of the first's end; MovedAgain: a server
	// moved again within WindowS at all (back or elsewhere).
	ServerMovedBack int `json:"server_moved_back"`
	MovedAgain      int `json:"moved_again_within_window"`
	// CooldownS is the agents' server_cooldown; CooldownViolations the
	// moves of a server that started less than that after its previous
	// move ended (the simulator runs no drain, which may: every one is
	// a violation, counted in safety too).
	CooldownS          float64  `json:"server_cooldown_s"`
	CooldownViolations int      `json:"cooldown_violations"`
	Descriptions       []string `json:"cooldown_violation_descriptions,omitempty"`
}

// regionMove is one live migration that completed.
type regionMove struct {
	server, from, to string
	start, end       time.Time
}

// reliefs follows, per host, the OVERLOAD events ended solved with the
// agents' own detector (scheduler/oscillation) on simulated time.
type reliefs struct {
	cfg   oscillation.Config
	now   func() time.Time
	det   map[string]*oscillation.Detector
	found int
	hosts map[string]bool
}

func newReliefs(cfg oscillation.Config, now func() time.Time) *reliefs {
	return &reliefs{cfg: cfg, now: now, det: map[string]*oscillation.Detector{}, hosts: map[string]bool{}}
}

// relieved notes that an OVERLOAD event of host ended solved.
func (r *reliefs) relieved(host string) {
	d, ok := r.det[host]
	if !ok {
		d = oscillation.New(r.cfg, r.now)
		r.det[host] = d
	}
	if _, osc := d.Relieved(host); osc {
		r.found++
		r.hosts[host] = true
	}
}

// oscillations counts the moves' oscillations and cooldown violations
// (moves in any order) and the hosts' reliefs.
func oscillations(cfg oscillation.Config, cooldown time.Duration, moves []regionMove, rel *reliefs) *Oscillations {
	o := &Oscillations{WindowS: cfg.Window.Seconds(), Events: cfg.Events, CooldownS: cooldown.Seconds()}
	if rel != nil {
		o.HostRelieved, o.Hosts = rel.found, len(rel.hosts)
	}
	moves = slices.Clone(moves)
	slices.SortStableFunc(moves, func(a, b regionMove) int { return cmp.Compare(a.start.UnixNano(), b.start.UnixNano()) })
	last := map[string]regionMove{}
	var desc []string
	for _, m := range moves {
		prev, ok := last[m.server]
		last[m.server] = m
		if !ok {
			continue
		}
		gap := m.start.Sub(prev.end)
		if gap <= cfg.Window {
			o.MovedAgain++
			if prev.from == m.to { // back where it was
				o.ServerMovedBack++
			}
		}
		if gap < cooldown {
			o.CooldownViolations++
			desc = append(desc, fmt.Sprintf("%s moved %s to %s %.0f s after its move %s to %s ended (server_cooldown %.0f s)",
				m.server, m.from, m.to, gap.Seconds(), prev.from, prev.to, cooldown.Seconds()))
		}
	}
	o.Descriptions = firstTen(desc)
	return o
}

// cooldownChecked is the server cooldown the observer checks: the
// agents' (--mode dvms); the oracle and the central baseline keep none.
func (c Config) cooldownChecked() time.Duration {
	if c.Mode != "dvms" {
		return 0
	}
	return c.Agent.ServerCooldown
}
