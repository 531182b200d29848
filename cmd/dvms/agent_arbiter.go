package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
)

// agentArbiter is the merge arbiter as the agent runs it.
type agentArbiter interface {
	consensus.Arbiter
	// RaftAddr is advertised in heartbeats ("" = not a voter candidate).
	RaftAddr() string
	// SetPeers follows membership.
	SetPeers([]consensus.Peer)
	Run(ctx context.Context) error
}

// newArbiter builds [consensus] arbiter: raft (the region's standing
// Raft group, requests forwarded over NATS) or local (one agent alone).
func newArbiter(cfg fileConfig, tr bus.Transport, natsURL string, log zerolog.Logger) (agentArbiter, error) {
	if cfg.Arbiter == "local" {
		log.Warn().Msg("[consensus] arbiter = local: merges decided by this agent alone (one-host trial only)")
		return localArbiter{consensus.NewLocal(time.Now)}, nil
	}
	rc := consensus.DefaultRaftConfig(cfg.Agent.ID)
	advertise, err := advertiseAddr(cfg.RaftBind, cfg.RaftAdvertise, natsURL)
	if err != nil {
		return nil, err
	}
	sc := consensus.ServiceConfig{Region: cfg.Runtime.Region, ID: cfg.Agent.ID, Site: cfg.Site, Bind: cfg.RaftBind,
		Advertise: advertise, Voters: cfg.Voters, Raft: rc}
	sec, err := raftTLS(cfg)
	if err != nil {
		return nil, err
	}
	if sec != nil {
		sc.Security = sec
		log.Info().Msg("raft over mutual TLS, certificates pinned by keys_dir")
	} else if cfg.RaftBind != "" {
		log.Warn().Str("bind", cfg.RaftBind).Msg("insecure_unsigned: raft runs over plain TCP; anyone reaching this port can rewrite the arbiter's state")
	}
	s, err := consensus.NewService(sc, tr, time.Now, log.With().Str("part", "arbiter").Logger())
	if err != nil {
		return nil, fmt.Errorf("merge arbiter: %w", err)
	}
	return s, nil
}

// advertiseAddr is the raft address the other voters dial: advertise if
// set; bind if it names an address; for a wildcard bind, the local
// address this host reaches the (first) NATS server from, with bind's
// port. Port 0 is left to the listener (the service advertises the port
// it got).
func advertiseAddr(bind, advertise, natsURL string) (string, error) {
	if advertise != "" || bind == "" {
		return advertise, nil
	}
	h, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("[consensus] bind %q: %w", bind, err)
	}
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		return "", nil // bind names an address: the service advertises it
	}
	first := natsURL
	if i := strings.IndexByte(first, ','); i >= 0 {
		first = first[:i]
	}
	u, err := url.Parse(first)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("[consensus] advertise: cannot derive from bind %q and NATS url %q: set advertise", bind, bus.RedactURLs(natsURL))
	}
	nhost := u.Host
	if u.Port() == "" {
		nhost = net.JoinHostPort(u.Hostname(), "4222")
	}
	conn, err := net.Dial("udp", nhost) // no packet is sent: this only picks the route
	if err != nil {
		return "", fmt.Errorf("[consensus] advertise: no route to NATS %s to derive it from (set advertise): %w", nhost, err)
	}
	defer conn.Close()
	ip := conn.LocalAddr().(*net.UDPAddr).IP
	return net.JoinHostPort(ip.String(), port), nil
}

// localArbiter adapts the single-process arbiter.
type localArbiter struct{ *consensus.Local }

func (localArbiter) RaftAddr() string              { return "" }
func (localArbiter) SetPeers([]consensus.Peer)     {}
func (localArbiter) Run(ctx context.Context) error { <-ctx.Done(); return nil }
