package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
)

// `dvms scheduler-api`: Nova's external scheduler. The HTTP service is
// scheduler/extsched/schedapi; this command wires it to the
// configuration and to the agents' summaries over NATS.

func init() {
	commands = append(commands, &cli.Command{
		Name:  "scheduler-api",
		Usage: "Nova's external scheduler: order candidate hosts by the demand the agents measure",
		Description: "Listens on [scheduler_api] listen for POST " + extsched.Path + " (the request and\n" +
			"response shapes of cortex's external scheduler API, so Nova's external-scheduler hook or the\n" +
			"dvms_nova weigher can call it), GET /healthz (503 while it knows no fresh host) and GET /metrics.\n" +
			"Reads the summaries the agents publish over NATS; needs no OpenStack credentials. Several\n" +
			"replicas behind one URL are fine.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "listen", Usage: "HTTP address (overrides [scheduler_api] listen)"},
			&cli.StringFlag{Name: "nats-url", Usage: "NATS server URL(s) (overrides [nats] url)"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides [DEFAULT] log_level)"},
		),
		Action: runSchedAPI,
	})
}

// schedAPIConfig loads the agents' configuration file for the service:
// no cloud is needed.
func schedAPIConfig(c *cli.Context) (fileConfig, error) {
	src := fileSource(c)
	for flag, opt := range map[string][2]string{
		"listen": {"scheduler_api", "listen"}, "nats-url": {"nats", "url"}, "log-level": {"DEFAULT", "log_level"},
	} {
		if c.IsSet(flag) {
			src.flags = append(src.flags, flagValue{lookupOption(opt[0], opt[1]), c.String(flag)})
		}
	}
	if lv, ok := logLevel(c); ok && !c.IsSet("log-level") { // dvms --log-level LEVEL scheduler-api
		src.flags = append(src.flags, flagValue{lookupOption("DEFAULT", "log_level"), lv})
	}
	cfg, err := loadConfig(src, "scheduler-api")
	return cfg, withoutCloudError(err)
}

// withoutCloudError drops errNoCloud from loadConfig's list of problems.
func withoutCloudError(err error) error {
	if err == nil {
		return nil
	}
	var keep []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !errors.Is(e, errNoCloud) {
				keep = append(keep, e)
			}
		}
		return errors.Join(keep...)
	}
	if errors.Is(err, errNoCloud) {
		return nil
	}
	return err
}

func runSchedAPI(c *cli.Context) error {
	cfg, err := schedAPIConfig(c)
	if err != nil {
		return fmt.Errorf("scheduler-api configuration:\n%w", err)
	}
	log := newLogger(cfg.LogLevel, cfg.LogFormat).With().Str("service", "scheduler-api").Logger()
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p, err := startSchedAPI(ctx, cfg, time.Now, log)
	if err != nil {
		return err
	}
	return p.wait()
}

// schedAPIProc is a running service.
type schedAPIProc struct {
	api  *schedapi.Service
	log  zerolog.Logger
	addr string
	done chan error
}

// natsRetry is how long scheduler-api waits between attempts to make its
// first NATS connection (later ones are the client's reconnects).
const natsRetry = 2 * time.Second

// startSchedAPI serves HTTP at once and subscribes to the region's
// summaries as soon as NATS answers (until then every host is unknown:
// Nova's order), until ctx ends; now is the clock of staleness (time.Now).
func startSchedAPI(ctx context.Context, cfg fileConfig, now func() time.Time, log zerolog.Logger) (*schedAPIProc, error) {
	if cfg.KeysDir != "" {
		// A bad keyring is a configuration error: refuse to start rather
		// than serve without summaries.
		if _, err := auth.LoadKeyring(cfg.KeysDir); err != nil {
			return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
		}
	}
	cfg.SchedAPIHTTP.Region = cfg.Runtime.Region // labels /metrics
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
	p := &schedAPIProc{api: api, log: log, addr: ln.Addr().String(), done: make(chan error, 1)}
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

// schedAPIBusConfig is scheduler-api's NATS connection: it is no agent,
// so it never authenticates as an agent's key (nkey_auth, shared with
// the agents in one dvms.conf) but with [nats] nkey_seed.
func schedAPIBusConfig(cfg fileConfig) bus.Config {
	cfg.NATSNkeyAuth = false
	return cfg.busConfig(cfg.NATSURL)
}

// subscribeSummaries connects to NATS (retrying every natsRetry until it
// answers) and passes the summaries to receive until ctx ends.
func subscribeSummaries(ctx context.Context, cfg fileConfig, receive bus.Handler, log zerolog.Logger) {
	bc := schedAPIBusConfig(cfg)
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
	sub, err := subscribeVerified(cfg, tr, subj, receive, log)
	if err != nil {
		log.Error().Err(err).Str("subject", subj).Msg("no summaries: every host keeps Nova's order")
		<-ctx.Done()
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	log.Info().Str("subject", subj).Msg("receiving the agents' summaries")
	<-ctx.Done()
}

// wait returns when the service stopped.
func (p *schedAPIProc) wait() error {
	if err := <-p.done; err != nil {
		return fmt.Errorf("scheduler-api: %w", err)
	}
	p.log.Info().Msg("scheduler-api stopped")
	return nil
}
