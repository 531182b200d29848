package main

import (
	"context"
	"fmt"
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
		return nil, fmt.Errorf("[consensus] advertise: %w", err)
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

// localArbiter adapts the single-process arbiter.
type localArbiter struct{ *consensus.Local }

func (localArbiter) RaftAddr() string              { return "" }
func (localArbiter) SetPeers([]consensus.Peer)     {}
func (localArbiter) Run(ctx context.Context) error { <-ctx.Done(); return nil }
