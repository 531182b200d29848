package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/scheduler/explain"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/oscillation"
)

// `dvms explain SERVER|HOST`: the last decisions that touched a server or
// a host, in words, from the agents' journals (scheduler/journal) over
// the status protocol (scheduler/status).

func init() {
	commands = append(commands, &cli.Command{
		Name:      "explain",
		Usage:     "why dvms did (or did not) move a server, or a host's servers: its last decisions, in words",
		ArgsUsage: "SERVER|HOST",
		Description: "Asks every agent of the region over NATS for its journal and lists the last decisions\n" +
			"that touched SERVER (a server id) or HOST: events raised, plans made, each move done,\n" +
			"advised, skipped or failed and why, events ended unsolved and why (no destination fits,\n" +
			"paused, excluded, advise mode...), an operator's approval, and, for a host whose\n" +
			"overload, underload or drain raised no event, why it was left alone (paused, excluded,\n" +
			"backing off after an unsolved event, time window closed). For a host, the controls that\n" +
			"hold it now (paused, excluded, advise mode, closed windows) come last. Each agent keeps\n" +
			"its last 100 events and 20 held records.\n\n" +
			"A server that dvms moved from A to B and then back from B to A within --window is\n" +
			"listed \"moved back\" (server_moved_back), whichever agents led the two moves: the\n" +
			"journals of every agent are joined (each agent's own oscillation report sees only the\n" +
			"moves it executed or followed).",
		Flags: append(natsFlags(),
			&cli.StringFlag{Name: "since", Usage: "only decisions since `TIME`: a duration ago (10m) or an RFC 3339 time"},
			&cli.IntFlag{Name: "max", Value: 20, Usage: "at most `N` decisions, the newest (0: all kept)"},
			&cli.DurationFlag{Name: "window", Value: oscillation.DefaultConfig().Window,
				Usage: "a server moved back where dvms took it from within this `DURATION` is listed \"moved back\" (as the agents' [scheduler] oscillation_window)"},
		),
		Action: runExplain,
	})
}

func runExplain(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError(errors.New("dvms explain SERVER|HOST (dvms explain --help)"))
	}
	if c.Int("max") < 0 {
		return usageError(errors.New("--max must be >= 0"))
	}
	if c.Duration("window") <= 0 {
		return usageError(errors.New("--window must be > 0"))
	}
	now := time.Now()
	since, err := parseSince(c.String("since"), now)
	if err != nil {
		return usageError(err)
	}
	reps, err := askAgents(c, since, 0)
	if err != nil {
		return err
	}
	target := c.Args().First()
	rows := explain.Decisions(reps, target, now, c.Duration("window"))
	if !since.IsZero() {
		rows = slices.DeleteFunc(rows, func(d explain.Row) bool { return d.At.Before(since) })
	}
	if n := c.Int("max"); n > 0 && len(rows) > n {
		rows = rows[len(rows)-n:]
	}
	if len(rows) == 0 {
		return fmt.Errorf("nothing in the journals of the %d agents that answered touched %q (a server id or a host name; each agent keeps its last %d events)", len(reps), target, journal.MaxEvents)
	}
	return writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), decisionsTable(rows))
}

func decisionsTable(ds []explain.Row) table {
	t := table{Name: "decisions", Columns: []string{"At", "Event", "Decision", "Server", "From", "To", "Class", "Why", "Detail", "Agent"}}
	for _, d := range ds {
		t.Rows = append(t.Rows, []any{stamp(d.At), d.Event, d.Decision, d.Server, d.From, d.To, d.Class, d.Why, d.Detail, d.Agent})
	}
	return t
}
