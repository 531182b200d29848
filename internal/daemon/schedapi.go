package daemon

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
	"github.com/rs/zerolog"
)

// `dvms scheduler-api`: Nova's external scheduler. The HTTP service is
// scheduler/extsched/schedapi; StartSchedAPI wires it to the
// configuration and to the agents' summaries over NATS.

// SchedAPI is a running `dvms scheduler-api`.
type SchedAPI struct {
	api  *schedapi.Service
	log  zerolog.Logger
	addr string
	done chan error
}

// natsRetry is how long scheduler-api waits between attempts to make its
// first NATS connection (later ones are the client's reconnects).
const natsRetry = 2 * time.Second

// StartSchedAPI serves HTTP at once and subscribes to the region's
// summaries as soon as NATS answers (until then every host is unknown:
// Nova's order), until ctx ends; now is the clock of staleness (time.Now).
func StartSchedAPI(ctx context.Context, cfg Config, now func() time.Time, log zerolog.Logger) (*SchedAPI, error) {
	if cfg.KeysDir != "" {
		// A bad keyring is a configuration error: refuse to start rather
		// than serve without summaries.
		if _, err := auth.LoadKeyring(cfg.KeysDir); err != nil {
			return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
		}
	}
	api, err := schedapi.New(cfg.SchedAPI, cfg.SchedAPIHTTP, now, log)
	if err != nil {
		return nil, fmt.Errorf("[scheduler_api] %w", err)
	}
	if !api.Authenticated() {
		log.Warn().Msg("[scheduler_api] token_file not set: callers are not authenticated, so no boot is counted as pending")
	}
	ln, err := net.Listen("tcp", cfg.SchedAPIListen)
	if err != nil {
		return nil, fmt.Errorf("[scheduler_api] listen %s: %w", cfg.SchedAPIListen, err)
	}
	p := &SchedAPI{api: api, log: log, addr: ln.Addr().String(), done: make(chan error, 1)}
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		subscribeSummaries(subCtx, cfg, api.Receive, log)
	}()
	go func() {
		err := api.Serve(ctx, ln)
		stopSub()
		<-subDone
		p.done <- err
	}()
	log.Info().Str("listen", p.addr).Str("region", cfg.Runtime.Region).Str("nats", bus.RedactURLs(cfg.NATSURL)).
		Dur("stale_after", cfg.SchedAPI.StaleAfter).Bool("authentication", api.Authenticated()).Msg("scheduler-api started")
	return p, nil
}

// SchedAPIBusConfig is scheduler-api's NATS connection: it is no agent,
// so it never authenticates as an agent's key (nkey_auth, shared with
// the agents in one dvms.conf) but with [nats] nkey_seed.
func SchedAPIBusConfig(cfg Config) bus.Config {
	cfg.NATSNkeyAuth = false
	return cfg.BusConfig(cfg.NATSURL)
}

// subscribeSummaries connects to NATS (retrying every natsRetry until it
// answers) and passes the summaries to receive until ctx ends.
func subscribeSummaries(ctx context.Context, cfg Config, receive bus.Handler, log zerolog.Logger) {
	bc := SchedAPIBusConfig(cfg)
	bc.Name = "dvms-scheduler-api"
	bc.OnStateChange = func(event string, err error) {
		log.Warn().Err(err).Str("nats", event).Msg("NATS connection state changed")
	}
	var tr *bus.NATS
	for {
		var err error
		if tr, err = bus.ConnectNATS(ctx, bc); err == nil {
			break
		}
		log.Warn().Err(err).Str("nats", bus.RedactURLs(cfg.NATSURL)).Dur("retry", natsRetry).
			Msg("NATS not reachable: no summaries, every host keeps Nova's order")
		t := time.NewTimer(natsRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	defer func() { _ = tr.Close() }()
	subj := bus.SummarySubject(cfg.Runtime.Region, "*")
	sub, err := SubscribeVerified(cfg, tr, subj, receive, log)
	if err != nil {
		log.Error().Err(err).Str("subject", subj).Msg("no summaries: every host keeps Nova's order")
		<-ctx.Done()
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	log.Info().Str("subject", subj).Msg("receiving the agents' summaries")
	<-ctx.Done()
}

// Wait returns when the service stopped.
func (p *SchedAPI) Wait() error {
	if err := <-p.done; err != nil {
		return fmt.Errorf("scheduler-api: %w", err)
	}
	p.log.Info().Msg("scheduler-api stopped")
	return nil
}

// Addr is the address the service listens on.
func (p *SchedAPI) Addr() string { return p.addr }
