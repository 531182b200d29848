package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/status"
)

// `dvms plans approve|reject ID`: an operator's decision on one advised
// plan, a signed operator command (scheduler/control) that the agent
// holding the plan carries out (scheduler/agentd/approve.go).

// approveTimeout is how long approve waits for the agent holding the
// plan by default: its answer comes after the plan's re-check (Nova
// reads, the hosts' agents asked for their demand).
const approveTimeout = time.Minute

// planSubcommands are `dvms plans approve` and `dvms plans reject`.
func planSubcommands() []*cli.Command {
	flags := func() []cli.Flag {
		var fs []cli.Flag
		for _, f := range natsFlags() {
			if slices.Contains(f.Names(), "timeout") {
				f = &cli.DurationFlag{Name: "timeout", Value: approveTimeout, Usage: "wait at most this `DURATION` for the answer of the agent holding the plan (its re-check reads Nova)"}
			}
			fs = append(fs, f)
		}
		return append(fs, &cli.StringFlag{Name: "key", EnvVars: []string{"DVMS_OPERATOR_KEY"},
			Usage: "operator's private key `FILE` (NAME.key, as dvms pause); without it the command is unsigned, which only agents with insecure_unsigned take"})
	}
	return []*cli.Command{
		{
			Name:      "approve",
			Usage:     "execute one advised plan now: re-checked first, refused with the reasons if the cloud changed",
			ArgsUsage: "ID",
			Description: "ID is the plan's event, as dvms plans lists it. The agent that advised the plan\n" +
				"re-checks every move against Nova (nothing sent) and refuses the whole plan, with each\n" +
				"move's reason, when any no longer holds (a server already moved, a destination that no\n" +
				"longer fits, the event's host no longer overloaded, the region paused...); otherwise it\n" +
				"executes the plan through its executor (each move re-checked again right before it\n" +
				"starts), whatever the mode. Signed with --key like dvms pause; the decision and the\n" +
				"moves are in the journal (dvms events, dvms explain). A plan is decided once.",
			Flags:  flags(),
			Action: func(c *cli.Context) error { return runDecision(c, control.OpApprove) },
		},
		{
			Name:        "reject",
			Usage:       "drop one advised plan (nothing is sent to Nova)",
			ArgsUsage:   "ID",
			Description: "The agent that advised the plan drops it and records the decision in its journal.",
			Flags:       flags(),
			Action:      func(c *cli.Context) error { return runDecision(c, control.OpReject) },
		},
	}
}

// runDecision signs and publishes an approve or reject of plan ID and
// prints the answer of the agent holding it. It fails when no agent holds
// the plan or the plan was refused.
func runDecision(c *cli.Context, op string) error {
	if c.NArg() != 1 {
		return usageError(fmt.Errorf("dvms plans %s ID (dvms plans lists the advised plans)", op))
	}
	cmd := control.Command{Op: op, Plan: c.Args().First()}
	acks, err := sendCommand(c, &cmd)
	if err != nil {
		return err
	}
	t := table{Name: "decision", Columns: []string{"Plan", "Agent", "Result", "Reason"}}
	var held *control.Ack
	var refusedAll []string
	for _, h := range slices.Sorted(maps.Keys(acks)) {
		a := acks[h]
		switch {
		case a.Plan != "":
			held = &a
			result := "refused"
			if a.Accepted {
				result = map[string]string{control.OpApprove: "approved", control.OpReject: "rejected"}[op]
			}
			t.Rows = append(t.Rows, []any{a.Plan, h, result, a.Reason})
		case a.Reason != "" && !a.Accepted && a.Reason != control.NoPlanHere:
			refusedAll = append(refusedAll, h+": "+a.Reason) // the command itself refused (signature, age)
		}
	}
	if held == nil {
		if len(refusedAll) > 0 {
			return fmt.Errorf("dvms plans %s %s: refused: %s", op, cmd.Plan, refusedAll[0])
		}
		return fmt.Errorf("dvms plans %s %s: none of the %d agents that answered holds this advised plan (dvms plans lists them; it may be decided already or replaced by a newer plan)", op, cmd.Plan, len(acks))
	}
	if err := writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), t); err != nil {
		return err
	}
	if !held.Accepted {
		return errors.New(held.Reason)
	}
	return nil
}

// sendCommand stamps cmd (version, random id, time), signs it with --key,
// publishes it to the region and gathers the agents' answers.
func sendCommand(c *cli.Context, cmd *control.Command) (map[string]control.Ack, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	cmd.V, cmd.ID, cmd.At = 1, hex.EncodeToString(b), time.Now().UTC()
	if err := cmd.Validate(); err != nil {
		return nil, usageError(fmt.Errorf("dvms %s: %w", cmd.Op, err))
	}
	signer, err := operatorSigner(c.String("key"))
	if err != nil {
		return nil, err
	}
	tr, err := connectCLI(c)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tr.Close() }()
	var seal func(string, []byte) []byte
	if signer != nil {
		seal = func(subject string, data []byte) []byte { return signer.Seal(subject, data, time.Now()) }
	}
	return status.SendControl(c.Context, tr, c.Duration("timeout"), c.String("region"), *cmd, seal, nil)
}
