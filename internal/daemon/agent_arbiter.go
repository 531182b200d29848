package daemon

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/scheduler/agentd"
)

// newArbiter builds [consensus] arbiter: raft (the region's standing
// Raft group, requests forwarded over NATS) or local (one agent alone).
func newArbiter(cfg Config, tr bus.Transport, natsURL string, log zerolog.Logger) (agentd.Arbiter, error) {
	if cfg.Arbiter == "local" {
		log.Warn().Msg("[consensus] arbiter = local: merges decided by this agent alone (one-host trial only)")
		return agentd.Shared{Arbiter: consensus.NewLocal(time.Now)}, nil
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
