package main

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/scheduler/extsched"
)

// `dvms scheduler-api`: Nova's external scheduler. The HTTP service is
// scheduler/extsched/schedapi, wired to the configuration and to the
// agents' summaries over NATS by daemon.StartSchedAPI; this is its
// command line.

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
			&cli.StringFlag{Name: "listen", Usage: "HTTP address `HOST:PORT` (overrides [scheduler_api] listen)"},
			&cli.StringFlag{Name: "nats-url", Usage: "NATS server `URL`(s) (overrides [nats] url)"},
			&cli.StringFlag{Name: "log-level", Usage: "log `LEVEL`: debug, info, warn or error (overrides [DEFAULT] log_level)"},
		),
		Action: runSchedAPI,
	})
}

// schedAPIConfig loads the agents' configuration file for the service:
// no cloud is needed.
func schedAPIConfig(c *cli.Context) (daemon.Config, error) {
	src := fileSource(c)
	for flag, opt := range map[string][2]string{
		"listen": {"scheduler_api", "listen"}, "nats-url": {"nats", "url"}, "log-level": {"DEFAULT", "log_level"},
	} {
		if c.IsSet(flag) {
			src.Flags = append(src.Flags, daemon.FlagValue{Option: daemon.LookupOption(opt[0], opt[1]), Value: c.String(flag)})
		}
	}
	if lv, ok := logLevel(c); ok && !c.IsSet("log-level") { // dvms --log-level LEVEL scheduler-api
		src.Flags = append(src.Flags, daemon.FlagValue{Option: daemon.LookupOption("DEFAULT", "log_level"), Value: lv})
	}
	cfg, err := daemon.Load(src, "scheduler-api")
	return cfg, withoutCloudError(err)
}

// withoutCloudError drops daemon.ErrNoCloud from daemon.Load's list of problems.
func withoutCloudError(err error) error {
	if err == nil {
		return nil
	}
	var keep []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !errors.Is(e, daemon.ErrNoCloud) {
				keep = append(keep, e)
			}
		}
		return errors.Join(keep...)
	}
	if errors.Is(err, daemon.ErrNoCloud) {
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
	p, err := daemon.StartSchedAPI(ctx, cfg, time.Now, log)
	if err != nil {
		return err
	}
	return p.Wait()
}
