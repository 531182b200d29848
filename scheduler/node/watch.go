package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
)

// The region's maintenance watch (DESIGN §4, §7: maintenance seen within
// ~2 s at a cost independent of the region's size). One agent of the
// region — the one Deps.Watcher elects, the live member with the smallest
// host name in `dvms agent` — lists the nova-compute services every
// Config.ServiceWatch (one request for the whole region) and publishes each
// host's service on bus.ServiceSubject when it changed, and every host's
// every Config.Refresh (messages may be lost). When the elected agent dies
// the next one takes over within the membership's dead_after. `dvms drain`
// publishes on the same subject after it disabled the service.
//
// A message is only a hint: the agent of the host samples the notice's
// service at once and re-reads it from Nova (monitor), and the executor
// re-reads it from Nova before the first move of a plan it starts
// (executor_reason.go), so a lost, late or forged message costs at most
// a few reads and a partition's work, never a move.

// ServiceNotice is what the watch publishes for one host.
type ServiceNotice struct {
	V       int          `json:"v"`
	Service nova.Service `json:"service"`
	// From is the agent (or "dvms-cli") that published it.
	From string `json:"from"`
}

// EncodeServiceNotice encodes a notice for bus.ServiceSubject.
func EncodeServiceNotice(s nova.Service, from string) ([]byte, error) {
	return json.Marshal(ServiceNotice{V: 1, Service: s, From: from})
}

func decodeServiceNotice(data []byte, host string) (nova.Service, error) {
	var n ServiceNotice
	if err := json.Unmarshal(data, &n); err != nil {
		return nova.Service{}, fmt.Errorf("service notice: %w", err)
	}
	if n.V != 1 || n.Service.Host != host {
		return nova.Service{}, fmt.Errorf("service notice v%d for %q: want v1 for %q", n.V, n.Service.Host, host)
	}
	return n.Service, nil
}

// receiveService is the bus handler of this host's service subject.
func (r *Runner) receiveService(_ string, data []byte) {
	s, err := decodeServiceNotice(data, r.agent.ID())
	if err != nil {
		r.dropped.Add(1)
		r.log.Warn().Err(err).Msg("malformed service notice rejected")
		return
	}
	// Latest wins: replace a notice the monitor has not taken yet.
	for {
		select {
		case r.svc <- s:
			return
		default:
		}
		select {
		case <-r.svc:
		default:
		}
	}
}

// watch runs the region's maintenance watch while Deps.Watcher elects
// this agent.
func (r *Runner) watch(ctx context.Context) {
	defer r.wg.Done()
	t := r.d.Clock.NewTicker(r.cfg.ServiceWatch)
	defer t.Stop()
	known := map[string]nova.Service{}
	var republished time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.d.Watcher() {
			if len(known) > 0 {
				r.log.Info().Msg("maintenance watch handed over")
				clear(known) // a later term starts by publishing every host
			}
			continue
		}
		if len(known) == 0 {
			r.log.Info().Dur("interval", r.cfg.ServiceWatch).Msg("maintenance watch: this agent lists the region's compute services")
		}
		svcs, err := r.d.Nova.Services(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Msg("maintenance watch: listing compute services failed")
			}
			continue
		}
		now := r.d.Clock.Now()
		all := now.Sub(republished) >= r.cfg.Refresh
		if all {
			republished = now
		}
		for _, n := range WatchStep(known, svcs, all) {
			s := n.Service
			if n.Changed {
				r.log.Info().Str("service_host", s.Host).Str("status", s.Status).Str("state", s.State).
					Str("reason", s.DisabledReason).Msg("maintenance watch: service changed")
			}
			data, err := EncodeServiceNotice(s, r.agent.ID())
			if err == nil {
				err = r.d.Bus.Publish(ctx, bus.ServiceSubject(r.cfg.Region, s.Host), data)
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn().Err(err).Str("service_host", s.Host).Msg("maintenance watch: publish failed")
			}
		}
	}
}

// Notice is a service the watch publishes; Changed when it differs from
// the one the watch knew (not on the watch's first listing, nor a
// republish).
type Notice struct {
	Service nova.Service
	Changed bool
}

// WatchStep is the watch's decision on one listing of the region's
// services (svcs), a step function shared by the watch and the virtual
// clock: what to publish — every service it did not know or that changed,
// every one when all (the periodic republish) — with known updated to the
// listing.
func WatchStep(known map[string]nova.Service, svcs []nova.Service, all bool) []Notice {
	var out []Notice
	for _, s := range svcs {
		old, seen := known[s.Host]
		known[s.Host] = s
		if seen && sameService(old, s) && !all {
			continue
		}
		out = append(out, Notice{Service: s, Changed: seen && !sameService(old, s)})
	}
	return out
}
