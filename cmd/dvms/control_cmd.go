package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/status"
)

// The operators' run-time control commands (scheduler/control has the agents'
// side and the protocol).

func init() {
	flags := func() []cli.Flag {
		return append(natsFlags(), &cli.StringFlag{Name: "key", EnvVars: []string{"DVMS_OPERATOR_KEY"},
			Usage: "operator's private key NAME.key (`dvms keygen --host NAME`; NAME.pub in every agent's keys_dir/operators); " +
				"without it the command is unsigned, which only agents with insecure_unsigned take"})
	}
	const how = "\n\nSent over NATS to every agent of the region, which applies it at once, keeps it and\n" +
		"passes it on to agents that start later (no restart, no configuration change). Signed\n" +
		"with --key; agents refuse a command not signed by a key of their keys_dir/operators\n" +
		"and say why. Prints each agent's answer and the controls it now holds."
	commands = append(commands,
		&cli.Command{
			Name:      "mode",
			Usage:     "advise or enforce, for the region or one host (--host), at run time",
			ArgsUsage: "advise|enforce|region",
			Description: "advise: agents compute, re-check and record plans (dvms plans) but send nothing to\n" +
				"Nova; enforce: they execute them. With --host, the mode of the moves from or to that\n" +
				"host only (region: the host follows the region's mode again). Until a mode is set,\n" +
				"each agent follows its [scheduler] advise_only." + how,
			Flags:  append(flags(), &cli.StringFlag{Name: "host", Usage: "set the mode of this host only"}),
			Action: runMode,
		},
		&cli.Command{
			Name:  "pause",
			Usage: "pause dvms in the region: no new event raised, no plan executed; migrations under way finish",
			Description: "Agents raise no new event and start no action (partitions in flight end with\n" +
				"their actions skipped, reason \"paused\"); actions Nova already accepted are followed\n" +
				"to their end. dvms status shows the region paused." + how,
			Flags:  flags(),
			Action: func(c *cli.Context) error { return runControl(c, control.Command{Op: control.OpPause}) },
		},
		&cli.Command{
			Name:        "resume",
			Usage:       "resume dvms in the region after dvms pause",
			Description: "Agents raise events and execute plans again." + how,
			Flags:       flags(),
			Action:      func(c *cli.Context) error { return runControl(c, control.Command{Op: control.OpResume}) },
		},
		&cli.Command{
			Name:      "exclude",
			Usage:     "opt HOST out: never a source nor a destination of dvms's moves, its agent raises no event",
			ArgsUsage: "HOST",
			Description: "HOST's agent keeps running (status, metrics) but raises no event and joins no\n" +
				"partition; a plan already made that moves servers from or to HOST has those moves\n" +
				"skipped (reason \"excluded\"). dvms include HOST ends it." + how,
			Flags:  flags(),
			Action: func(c *cli.Context) error { return runHostControl(c, control.OpExclude) },
		},
		&cli.Command{
			Name:        "include",
			Usage:       "end dvms exclude HOST",
			ArgsUsage:   "HOST",
			Description: "HOST takes part in dvms's moves again." + how,
			Flags:       flags(),
			Action:      func(c *cli.Context) error { return runHostControl(c, control.OpInclude) },
		},
	)
}

func runMode(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError(errors.New("dvms mode advise|enforce [--host HOST] (dvms mode --help)"))
	}
	cmd := control.Command{Op: control.OpMode, Mode: c.Args().First(), Host: c.String("host")}
	return runControl(c, cmd)
}

func runHostControl(c *cli.Context, op string) error {
	if c.NArg() != 1 {
		return usageError(fmt.Errorf("dvms %s HOST (dvms %s --help)", op, op))
	}
	return runControl(c, control.Command{Op: op, Host: c.Args().First()})
}

// runControl signs cmd (with --key), publishes it and prints the agents'
// answers. It fails when no agent answered or any refused.
func runControl(c *cli.Context, cmd control.Command) error {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	cmd.V, cmd.ID, cmd.At = 1, hex.EncodeToString(b), time.Now().UTC()
	if err := cmd.Validate(); err != nil {
		return usageError(fmt.Errorf("dvms %s: %w", cmd.Op, err))
	}
	signer, err := operatorSigner(c.String("key"))
	if err != nil {
		return err
	}
	tr, err := connectCLI(c)
	if err != nil {
		return err
	}
	defer func() { _ = tr.Close() }()
	var seal func(string, []byte) []byte
	if signer != nil {
		seal = func(subject string, data []byte) []byte { return signer.Seal(subject, data, time.Now()) }
	}
	acks, err := status.SendControl(c.Context, tr, c.Duration("timeout"), c.String("region"), cmd, seal, nil)
	if err != nil {
		return err
	}
	t := table{Name: "agents", Columns: []string{"Host", "Result", "Reason", "Paused", "Mode", "Advise", "Excluded"}}
	var refused []string
	for _, h := range slices.Sorted(maps.Keys(acks)) {
		a := acks[h]
		result := "unchanged"
		switch {
		case !a.Accepted:
			result = "refused"
			refused = append(refused, h+": "+a.Reason)
		case a.Changed:
			result = "applied"
		}
		t.Rows = append(t.Rows, []any{h, result, a.Reason, a.Control.Paused, a.Control.Mode, a.Advise, strings.Join(a.Control.Excluded, " ")})
	}
	if err := writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), t); err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("refused by %d of %d agents: %s", len(refused), len(acks), strings.Join(refused, "; "))
	}
	return nil
}

// operatorSigner loads --key (NAME.key; nil without one).
func operatorSigner(path string) (*auth.Signer, error) {
	if path == "" {
		return nil, nil
	}
	dir, file := filepath.Split(path)
	name, ok := strings.CutSuffix(file, auth.SeedExt)
	if !ok {
		return nil, usageError(fmt.Errorf("--key %q: want the operator's private key file NAME%s", path, auth.SeedExt))
	}
	if dir == "" {
		dir = "."
	}
	s, err := auth.LoadSigner(dir, name)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	return s, nil
}
