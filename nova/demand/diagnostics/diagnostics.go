// Package diagnostics is a nova.DemandSource built on Nova's admin
// server diagnostics (GET /servers/{id}/diagnostics, the standard format
// of microversion 2.48):
//
//	{"cpu_details": [{"id": 0, "time": 17300000000, "utilisation": 12}],
//	 "memory_details": {"maximum": 512, "used": 256}, ...}
//
// CPU: when the driver reports every vCPU's utilisation (percent), their
// sum / 100 cores; otherwise (libvirt reports only cumulative time, ns)
// the rate of the summed time between two calls, so a server's first
// call records its baseline and leaves it out of the map (unknown
// demand). RAM: memory_details.used, MB.
//
// Only ACTIVE and MIGRATING servers are measured. A server deleted or
// changing state between the listing and its diagnostics (404, 409) is
// skipped; any other failure fails the call.
package diagnostics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// API is what the source needs from Nova; *openstack.Client has it.
type API interface {
	// Servers lists the servers on host.
	Servers(ctx context.Context, host string) ([]nova.Server, error)
	// Diagnostics returns the diagnostics document of a server as Nova
	// answers it.
	Diagnostics(ctx context.Context, serverID string) ([]byte, error)
}

// Config of the diagnostics source.
type Config struct {
	// Concurrency bounds the diagnostics requests in flight. Default 4.
	Concurrency int
	// MinInterval: a host's servers are measured at most once per
	// interval; calls in between return the last measurement. Each
	// measurement costs Nova one listing plus one request per server, so
	// this source must never be read every second. Default 60 s; 0 reads
	// every call (tests).
	MinInterval time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{Concurrency: 4, MinInterval: time.Minute} }

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	if c.Concurrency < 1 || c.Concurrency > 64 {
		return fmt.Errorf("demand/diagnostics: concurrency %d must be in 1..64", c.Concurrency)
	}
	if c.MinInterval < 0 {
		return fmt.Errorf("demand/diagnostics: min interval %s must be >= 0", c.MinInterval)
	}
	return nil
}

// Source is the diagnostics demand source; safe for concurrent use.
type Source struct {
	cfg Config
	api API
	now func() time.Time

	mu    sync.Mutex
	prev  map[string]cpuSample // by server ID
	cache map[string]measured  // by host
}

type measured struct {
	at     time.Time
	demand map[string]nova.Demand
}

type cpuSample struct {
	timeNS float64
	at     time.Time
}

var _ nova.DemandSource = (*Source)(nil)

// New returns a diagnostics source over api, using the wall clock.
func New(cfg Config, api API) (*Source, error) { return NewWithClock(cfg, api, time.Now) }

// NewWithClock is New reading time from now (tests).
func NewWithClock(cfg Config, api API, now func() time.Time) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if api == nil {
		return nil, errors.New("demand/diagnostics: no Nova API")
	}
	return &Source{cfg: cfg, api: api, now: now, prev: map[string]cpuSample{}, cache: map[string]measured{}}, nil
}

// document is the part of the 2.48 diagnostics dvms reads.
type document struct {
	CPUDetails []struct {
		Time        *float64 `json:"time"`
		Utilisation *float64 `json:"utilisation"`
	} `json:"cpu_details"`
	MemoryDetails struct {
		Used *float64 `json:"used"`
	} `json:"memory_details"`
}

// reading is one server's parsed diagnostics.
type reading struct {
	id      string
	doc     document
	at      time.Time
	skipped bool
	err     error
}

// Demand measures the servers on host, at most once per MinInterval.
func (s *Source) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	s.mu.Lock()
	if m, ok := s.cache[host]; ok && s.cfg.MinInterval > 0 && s.now().Sub(m.at) < s.cfg.MinInterval {
		s.mu.Unlock()
		return maps.Clone(m.demand), nil
	}
	s.mu.Unlock()
	out, err := s.measure(ctx, host)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cache[host] = measured{at: s.now(), demand: maps.Clone(out)}
	s.mu.Unlock()
	return out, nil
}

func (s *Source) measure(ctx context.Context, host string) (map[string]nova.Demand, error) {
	servers, err := s.api.Servers(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("demand/diagnostics: servers on %s: %w", host, err)
	}
	var ids []string
	for _, sv := range servers {
		if sv.Status == nova.StatusActive || sv.Status == nova.StatusMigrating {
			ids = append(ids, sv.ID)
		}
	}
	readings := make([]reading, len(ids))
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				readings[i] = reading{id: id, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			readings[i] = s.read(ctx, id)
		}()
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]nova.Demand{}
	for _, r := range readings {
		if r.err != nil {
			return nil, fmt.Errorf("demand/diagnostics: server %s: %w", r.id, r.err)
		}
	}
	live := map[string]bool{}
	for _, r := range readings {
		if r.skipped {
			continue
		}
		live[r.id] = true
		if r.doc.MemoryDetails.Used == nil {
			return nil, fmt.Errorf("demand/diagnostics: server %s: no memory_details.used", r.id)
		}
		cpu, ok, err := s.cpu(r)
		if err != nil {
			return nil, fmt.Errorf("demand/diagnostics: server %s: %w", r.id, err)
		}
		if ok {
			out[r.id] = nova.Demand{CPU: cpu, RAMMB: *r.doc.MemoryDetails.Used}
		}
	}
	for id := range s.prev {
		if !live[id] {
			delete(s.prev, id)
		}
	}
	return out, nil
}

func (s *Source) read(ctx context.Context, id string) reading {
	raw, err := s.api.Diagnostics(ctx, id)
	if errors.Is(err, nova.ErrNotFound) || errors.Is(err, nova.ErrConflict) {
		return reading{id: id, skipped: true}
	}
	if err != nil {
		return reading{id: id, err: err}
	}
	r := reading{id: id, at: s.now()}
	if err := json.Unmarshal(raw, &r.doc); err != nil {
		return reading{id: id, err: fmt.Errorf("diagnostics document: %w", err)}
	}
	return r
}

// cpu returns the cores a server uses, and whether it is known yet.
// Called with s.mu held.
func (s *Source) cpu(r reading) (float64, bool, error) {
	if len(r.doc.CPUDetails) == 0 {
		return 0, false, errors.New("no cpu_details")
	}
	util, total, allUtil := 0.0, 0.0, true
	for _, c := range r.doc.CPUDetails {
		if c.Utilisation == nil {
			allUtil = false
		} else {
			util += *c.Utilisation
		}
		if c.Time == nil {
			if !allUtil {
				return 0, false, errors.New("cpu_details without time or utilisation")
			}
		} else {
			total += *c.Time
		}
	}
	if allUtil {
		return util / 100, true, nil
	}
	p, ok := s.prev[r.id]
	s.prev[r.id] = cpuSample{timeNS: total, at: r.at}
	elapsed := r.at.Sub(p.at)
	if !ok || total < p.timeNS || elapsed <= 0 {
		return 0, false, nil
	}
	return (total - p.timeNS) / float64(elapsed.Nanoseconds()), true, nil
}
