// Package oscillation notices, for operators, a rebalancer that goes
// back and forth: a host relieved of overload again and again, a server
// moved back where dvms took it from. It only observes what an agent
// saw (its records and the actions it executed or adopted); it changes
// nothing the agent decides.
package oscillation

import (
	"errors"
	"sync"
	"time"
)

// Config: Events reliefs of one host within Window is an oscillation,
// and so is a server moved back within Window.
type Config struct {
	Events int
	Window time.Duration
}

// DefaultConfig: 3 reliefs in 30 minutes.
func DefaultConfig() Config { return Config{Events: 3, Window: 30 * time.Minute} }

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.Events < 2 {
		errs = append(errs, errors.New("oscillation_events must be >= 2"))
	}
	if c.Window <= 0 {
		errs = append(errs, errors.New("oscillation_window must be > 0"))
	}
	return errors.Join(errs...)
}

// Kind of oscillation (the metric's kind label).
type Kind string

const (
	// HostRelieved: the host's OVERLOAD events ended solved Events times
	// within Window.
	HostRelieved Kind = "host_relieved"
	// ServerMovedBack: a server moved A→B then B→A within Window.
	ServerMovedBack Kind = "server_moved_back"
)

// Kinds are every kind, for the metric's zero series.
var Kinds = []Kind{HostRelieved, ServerMovedBack}

// Detection is one oscillation noticed.
type Detection struct {
	Kind   Kind
	Host   string // the host relieved; the server's host before it went back
	Server string // ServerMovedBack only
	From   string // ServerMovedBack: the move back, From → To
	To     string
	// Count is the reliefs (HostRelieved) or the moves (2) within Window.
	Count  int
	Window time.Duration
}

// maxKept bounds what a detector keeps (moves, detections): far above
// what one agent sees within a window.
const maxKept = 4096

type move struct {
	from, to string
	at       time.Time
}

// Detector is one agent's oscillation detector. Safe for concurrent use.
type Detector struct {
	cfg Config
	now func() time.Time

	mu       sync.Mutex
	relieved []time.Time     // the host's reliefs within the window, not yet reported
	moves    map[string]move // server → its last move within the window
	found    []time.Time     // detections, for Recent
}

// New is a detector stamped by now.
func New(cfg Config, now func() time.Time) *Detector {
	return &Detector{cfg: cfg, now: now, moves: map[string]move{}}
}

// Relieved notes that an OVERLOAD event of host ended solved. It reports
// an oscillation at the Events-th relief within Window, then counts
// afresh (one detection per Events reliefs).
func (d *Detector) Relieved(host string) (Detection, bool) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.relieved = append(within(d.relieved, now, d.cfg.Window), now)
	if len(d.relieved) < d.cfg.Events {
		return Detection{}, false
	}
	n := len(d.relieved)
	d.relieved = d.relieved[:0]
	d.foundAt(now)
	return Detection{Kind: HostRelieved, Host: host, Count: n, Window: d.cfg.Window}, true
}

// Moved notes that server moved from → to. It reports an oscillation
// when the server's previous move within Window went to → from.
func (d *Detector) Moved(server, from, to string) (Detection, bool) {
	if server == "" || from == "" || to == "" || from == to {
		return Detection{}, false
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for s, m := range d.moves {
		if now.Sub(m.at) > d.cfg.Window {
			delete(d.moves, s)
		}
	}
	prev, ok := d.moves[server]
	if len(d.moves) < maxKept || ok {
		d.moves[server] = move{from: from, to: to, at: now}
	}
	if !ok || prev.from != to || prev.to != from {
		return Detection{}, false
	}
	d.foundAt(now)
	return Detection{Kind: ServerMovedBack, Host: from, Server: server, From: from, To: to, Count: 2, Window: d.cfg.Window}, true
}

// Recent is the number of oscillations detected within the last Window.
func (d *Detector) Recent() int {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.found = within(d.found, now, d.cfg.Window)
	return len(d.found)
}

// Window is the configured window.
func (d *Detector) Window() time.Duration { return d.cfg.Window }

func (d *Detector) foundAt(now time.Time) {
	d.found = within(d.found, now, d.cfg.Window)
	if len(d.found) >= maxKept {
		d.found = d.found[1:]
	}
	d.found = append(d.found, now)
}

// within drops the times (oldest first) older than window before now.
func within(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > window {
		i++
	}
	return append(ts[:0], ts[i:]...)
}
