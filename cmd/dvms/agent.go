package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "agent",
		Usage: "run the sidecar agent of one compute host",
		Description: "Watches HOST's servers and nova-compute service, takes part in the\n" +
			"decentralized scheduling of its region over NATS and executes plans through the\n" +
			"Nova API. Configuration: --config (etc/dvms/dvms.conf.sample documents every\n" +
			"option), then DVMS_* environment variables, then these flags. SIGTERM or SIGINT\n" +
			"stops it gracefully: no new event or partition, a plan being executed is finished\n" +
			"(at most [scheduler] stop_grace).",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "host", EnvVars: []string{"DVMS_HOST"}, Usage: "compute `HOST` name as Nova knows it (default: this machine's host name)"},
			&cli.BoolFlag{Name: "embedded-nats", Usage: "run a NATS server in this process on [nats] url's address (one-host trials)"},
		}, configFlags()...), optionFlags()...),
		Action: runAgent,
	})
}

// optionFlags are the flags of the options that have one (the option
// table, internal/daemon/options.go).
func optionFlags() []cli.Flag {
	var fs []cli.Flag
	for i := range daemon.Options {
		if o := &daemon.Options[i]; o.Flag() != "" {
			usage, _, _ := strings.Cut(o.Help(), ". ")
			fs = append(fs, &cli.StringFlag{Name: o.Flag(), Usage: fmt.Sprintf("%s (`%s` overrides [%s] %s)", strings.TrimSuffix(usage, "."), o.Placeholder(), o.Section(), o.Name())})
		}
	}
	return fs
}

// agentConfig loads the configuration for the agent of host with the
// flags applied, listing every problem.
func agentConfig(c *cli.Context) (daemon.Config, error) {
	host := c.String("host")
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return daemon.Config{}, fmt.Errorf("--host not given and no host name: %w", err)
		}
		host = h
	}
	src := fileSource(c)
	for i := range daemon.Options {
		if o := &daemon.Options[i]; o.Flag() != "" && c.IsSet(o.Flag()) {
			src.Flags = append(src.Flags, daemon.FlagValue{Option: o, Value: c.String(o.Flag())})
		}
	}
	if lv, ok := logLevel(c); ok && !c.IsSet("log-level") { // dvms --log-level LEVEL agent
		src.Flags = append(src.Flags, daemon.FlagValue{Option: daemon.LookupOption("DEFAULT", "log_level"), Value: lv})
	}
	cfg, err := daemon.Load(src, host)
	if cfg.Arbiter == "local" && !c.Bool("embedded-nats") {
		err = errors.Join(err, errors.New("[consensus] arbiter = local lets every agent decide merges alone: only for a single agent with --embedded-nats; use raft"))
	}
	return cfg, errors.Join(err, daemon.CheckTrust(cfg))
}

func runAgent(c *cli.Context) error {
	cfg, err := agentConfig(c)
	if err != nil {
		return daemon.ConfigError(fmt.Errorf("agent configuration:\n%w", err))
	}
	// The level is the process's global one, so that a reload (SIGHUP)
	// changes it for every logger derived from this one.
	lvl, _ := daemon.ParseLevel(cfg.LogLevel)
	zerolog.SetGlobalLevel(lvl)
	log := newLogger("debug", cfg.LogFormat).With().Str("agent", cfg.Agent.ID).Logger()
	daemon.WarnReadable(log, c.String("config"), "the configuration file")
	daemon.WarnReadable(log, daemon.CloudsFile(cfg.CloudsYAML), "clouds.yaml")
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGHUP reloads, also one that comes while the agent starts (handled
	// once it runs): it must never kill the agent.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	return daemon.Serve(ctx, cfg, c.Bool("embedded-nats"), func() (daemon.Config, error) { return agentConfig(c) }, hup, log)
}
