package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/openstack"
)

// defaultDrainReason is what `dvms drain` sets as the disabled reason; the
// agents' drain_reason_pattern matches it by default.
const defaultDrainReason = "dvms:maintenance"

func init() {
	cloudFlags := func() []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: "os-cloud", Usage: "`CLOUD` name in clouds.yaml (default: $OS_CLOUD)"},
			&cli.StringFlag{Name: "os-client-config-file", EnvVars: []string{"OS_CLIENT_CONFIG_FILE"}, Usage: "clouds.yaml `FILE` to read (default: the openstack CLI's search path)"},
			&cli.DurationFlag{Name: "request-timeout", Value: 30 * time.Second, Usage: "bound on each Nova request, a `DURATION`"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL`: debug, info, warn or error"},
		}, notifyFlags()...)
	}
	commands = append(commands,
		&cli.Command{
			Name:      "drain",
			Usage:     "put a compute host in maintenance: dvms agents move its servers away",
			ArgsUsage: "HOST",
			Description: "Disables the host's nova-compute service with --reason, as\n" +
				"`openstack compute service set --disable --disable-reason R HOST nova-compute` does;\n" +
				"the dvms agents see it and move every server off the host. With --wait, follows the\n" +
				"host until it is empty (exit 0) or nothing changed on it for --stall (exit 1, listing\n" +
				"the servers that remain). With --dry-run, changes nothing: prints the plan that would\n" +
				"empty the host (what moves where, in which step), made by the agents' own code run in\n" +
				"this process (one agent per compute host, servers at their flavor, the ring order: no\n" +
				"Vivaldi coordinates here); exit 1 when no plan empties it within --max-hosts hosts.",
			Flags: append(append(cloudFlags(),
				&cli.BoolFlag{Name: "dry-run", Usage: "print the plan that would empty the host; disable nothing, move nothing"},
				&cli.IntFlag{Name: "max-hosts", Value: 16, Usage: "with --dry-run: `N` hosts the partition may grow to (the host included)"},
			), append(outputFlags(),
				&cli.StringFlag{Name: "reason", Value: defaultDrainReason, Usage: "disabled `REASON` (dvms agents react to their drain_reason_pattern)"},
				&cli.BoolFlag{Name: "wait", Usage: "wait until the host is empty"},
				&cli.DurationFlag{Name: "poll", Value: 5 * time.Second, Usage: "with --wait: list the host's servers every `DURATION`"},
				&cli.DurationFlag{Name: "stall", Value: 10 * time.Minute, Usage: "with --wait: give up when nothing changed on the host for this `DURATION`"},
			)...),
			Action: runDrain,
		},
		&cli.Command{
			Name:        "undrain",
			Usage:       "end maintenance: enable the host's nova-compute service again",
			ArgsUsage:   "HOST",
			Description: "Enables the host's nova-compute service (and clears its disabled reason).",
			Flags:       cloudFlags(),
			Action:      runUndrain,
		},
	)
}

// drainClient connects to the cloud the flags name.
func drainClient(c *cli.Context) (string, *openstack.Client, zerolog.Logger, error) {
	host, err := hostArg(c)
	level := c.String("log-level")
	if lv, ok := logLevel(c); ok {
		level = lv
	}
	log := newLogger(level, "console")
	if err != nil {
		return "", nil, log, err
	}
	if _, err := daemon.ParseLevel(level); err != nil {
		return "", nil, log, err
	}
	cloud, err := daemon.ResolveCloud(c.String("os-cloud"), os.LookupEnv)
	if err != nil {
		return "", nil, log, err
	}
	cfg := openstack.DefaultConfig(cloud)
	cfg.CloudsFile = c.String("os-client-config-file")
	cfg.RequestTimeout = c.Duration("request-timeout")
	cl, err := openstack.New(c.Context, cfg)
	if err != nil {
		return "", nil, log, err
	}
	return host, cl, log, nil
}

// hostArg returns the HOST argument. urfave/cli stops parsing flags at
// the first argument; `dvms drain HOST --wait` is the documented order,
// so flags after HOST are parsed here and set on c.
func hostArg(c *cli.Context) (string, error) {
	args := c.Args().Slice()
	if len(args) == 0 || args[0] == "" || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(c.App.ErrWriter, "usage: dvms %s [options] %s\n%s\n(dvms %s --help lists the options)\n",
			c.Command.Name, c.Command.ArgsUsage, c.Command.Usage, c.Command.Name)
		return "", usageError(fmt.Errorf("%s: want a HOST argument", c.Command.Name))
	}
	if len(args) == 1 {
		return args[0], nil
	}
	fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range c.Command.Flags {
		if err := f.Apply(fs); err != nil {
			return "", err
		}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return "", fmt.Errorf("%s: %w", c.Command.Name, err)
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("%s: want one HOST argument, got %q too", c.Command.Name, fs.Args())
	}
	var setErr error
	fs.Visit(func(f *flag.Flag) {
		if err := c.Set(f.Name, f.Value.String()); err != nil && setErr == nil {
			setErr = fmt.Errorf("%s: --%s: %w", c.Command.Name, f.Name, err)
		}
	})
	return args[0], setErr
}

func runDrain(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.Context = ctx
	host, cl, log, err := drainClient(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return runDrainDryRun(c, host, cl, log)
	}
	if c.Duration("poll") <= 0 || c.Duration("stall") <= 0 {
		return errors.New("drain: --poll and --stall must be positive")
	}
	reason := c.String("reason")
	if err := cl.SetServiceStatus(ctx, host, true, reason); err != nil {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	log.Info().Str("host", host).Str("reason", reason).Msg("nova-compute service disabled")
	notifyAgent(c, host, true, reason, log)
	if !c.Bool("wait") {
		fmt.Printf("%s: disabled (%s); dvms agents will move its servers away\n", host, reason)
		return nil
	}
	tick := time.NewTicker(c.Duration("poll"))
	defer tick.Stop()
	left, err := nova.WaitDrained(ctx, cl, host, c.Duration("stall"), tick.C, time.Now, os.Stdout, log)
	if err != nil {
		return err
	}
	if len(left) > 0 && nova.LeftForOwners(left) {
		return fmt.Errorf("drain %s: not drained: %d server(s) left for their owners (%s=notify): %s", host, len(left), nova.MetaMaintenanceAction, serverIDs(left))
	}
	if len(left) > 0 {
		return fmt.Errorf("drain %s: %d server(s) remain: %s", host, len(left), serverIDs(left))
	}
	return nil
}

func runUndrain(c *cli.Context) error {
	host, cl, log, err := drainClient(c)
	if err != nil {
		return err
	}
	if err := cl.SetServiceStatus(c.Context, host, false, ""); err != nil {
		return fmt.Errorf("undrain %s: %w", host, err)
	}
	log.Info().Str("host", host).Msg("nova-compute service enabled")
	notifyAgent(c, host, false, "", log)
	fmt.Printf("%s: enabled\n", host)
	return nil
}

func serverIDs(ss []nova.Server) string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return strings.Join(ids, " ")
}
