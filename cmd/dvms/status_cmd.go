package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/status"
)

// statusEvents is how many recent events `dvms status` shows.
const statusEvents = 10

// natsFlags are the flags of the commands that ask the agents over NATS.
func natsFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "nats-url", EnvVars: []string{"DVMS_NATS_URL"}, Value: "nats://127.0.0.1:4222", Usage: "NATS `URL`(s) of the agents"},
		&cli.StringFlag{Name: "nats-creds", EnvVars: []string{"DVMS_NATS_CREDS_FILE"}, Usage: "NATS credentials `FILE` (optional)"},
		&cli.StringFlag{Name: "region", EnvVars: []string{"DVMS_REGION"}, Value: "RegionOne", Usage: "dvms `REGION` of the agents"},
		&cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, Usage: "wait at most this `DURATION` for the agents' answers (less once every member answered)"},
		&cli.StringFlag{Name: "keys-dir", EnvVars: []string{"DVMS_KEYS_DIR"}, Usage: "the region's keys `DIR` (the agents' HOST.pub): take only answers signed by the key of the host they report on (default: [operator] keys_dir, else [DEFAULT] keys_dir; none: unverified)"},
	}, append(append(natsAuthFlags(), operatorConfigFlags()...), outputFlags()...)...)
}

func init() {
	commands = append(commands,
		&cli.Command{
			Name:  "status",
			Usage: "the region at a glance: agents, partitions in flight, recent events",
			Description: "Asks every agent of the region over NATS (no Nova credentials needed). Agents\n" +
				"that do not answer within --timeout but that others hear are listed as \"no answer\".",
			Flags:  natsFlags(),
			Action: runStatus,
		},
		&cli.Command{
			Name:  "plans",
			Usage: "plans the agents computed in advise mode, with their moves (nothing was sent to Nova)",
			Description: "Agents in advise mode (dvms mode advise, or [scheduler] advise_only = true) compute,\n" +
				"re-check and record plans but send nothing to Nova; this lists those plans from the\n" +
				"agents' journals: each move with whether its re-check held (\"advise mode: not\n" +
				"executed\") or why it would be skipped. An agent plans its event again after each\n" +
				"backoff: the same plan (same moves, same re-checks) is listed once, the latest\n" +
				"event's, with how many times it was advised (Advised) and since when.\n\n" +
				"dvms plans approve ID executes one (re-checked first: refused with the reasons when\n" +
				"the cloud changed), dvms plans reject ID drops it; a decided plan is no longer listed.",
			Flags: append(natsFlags(),
				&cli.StringFlag{Name: "host", Usage: "only plans of this `HOST`'s events, or moving servers from or to it"},
				&cli.StringFlag{Name: "since", Usage: "only plans `SINCE`: a duration ago (10m) or an RFC 3339 time"},
			),
			Action:      runPlans,
			Subcommands: planSubcommands(), // approve, reject (plans_approve_cmd.go)
		},
		&cli.Command{
			Name:  "events",
			Usage: "recent events, with every step and each Nova action's request ids",
			Description: "Joins what every agent of the region keeps of its last events (each agent keeps\n" +
				"100): raised, partition steps, planned, actions with Nova's request id, outcome.",
			Flags: append(natsFlags(),
				&cli.StringFlag{Name: "host", Usage: "only events of this `HOST`, or that moved servers from or to it"},
				&cli.StringFlag{Name: "since", Usage: "only events changed `SINCE`: a duration ago (10m) or an RFC 3339 time"},
				&cli.BoolFlag{Name: "steps", Usage: "show each event's partition steps too"},
				&cli.BoolFlag{Name: "follow", Usage: "then print each step and action as the agents note them, until interrupted (one line each; JSON lines with -f json)"},
				&cli.DurationFlag{Name: "message-window", EnvVars: []string{"DVMS_MESSAGE_WINDOW"}, Value: status.DefaultUpdateWindow,
					Usage: "with --follow and --keys-dir, drop an update signed further than this `DURATION` from now, as the agents do (default: [DEFAULT] message_window of --config)"},
			),
			Action: runEvents,
		},
	)
}

// askAgents connects to the agents' NATS and gathers their reports.
func askAgents(c *cli.Context, since time.Time, maxEvents int) ([]status.Report, error) {
	tr, err := connectCLI(c)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tr.Close() }()
	return askOn(c, tr, since, maxEvents)
}

// connectCLI checks the common flags and connects to the agents' NATS.
func connectCLI(c *cli.Context) (*bus.NATS, error) {
	if c.Duration("timeout") <= 0 {
		return nil, usageError(fmt.Errorf("--timeout must be positive"))
	}
	if f := c.String("format"); !slices.Contains(formats, f) {
		return nil, usageError(fmt.Errorf("-f %q: want one of %s", f, strings.Join(formats, ", ")))
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	bc := bus.DefaultConfig()
	bc.URL, bc.Name, bc.CredsFile, bc.MaxReconnects = c.String("nats-url"), "dvms-cli", c.String("nats-creds"), 0
	return bus.ConnectNATS(ctx, withNATSAuth(c, bc))
}

func askOn(c *cli.Context, tr bus.Transport, since time.Time, maxEvents int) ([]status.Report, error) {
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout")+10*time.Second)
	defer cancel()
	gc := status.GatherConfig{Region: c.String("region"), Timeout: c.Duration("timeout"), Since: since, Max: maxEvents}
	keys, err := cliKeys(c)
	if err != nil {
		return nil, err
	}
	if keys != nil {
		var mu sync.Mutex
		gc.Keys = keys
		gc.OnDrop = func(host, reason string) {
			mu.Lock()
			defer mu.Unlock()
			if host == "" {
				fmt.Fprintf(c.App.ErrWriter, "dvms: an answer dropped: %s\n", reason)
				return
			}
			fmt.Fprintf(c.App.ErrWriter, "dvms: an answer signed by %s dropped: %s\n", host, reason)
		}
	}
	return status.Gather(ctx, tr, gc)
}

// cliKeys is the region's keyring of --keys-dir (nil when unset:
// nothing verified).
func cliKeys(c *cli.Context) (*auth.Keyring, error) {
	dir := c.String("keys-dir")
	if dir == "" {
		return nil, nil
	}
	keys, err := auth.LoadKeyring(dir)
	if err != nil {
		return nil, usageError(fmt.Errorf("--keys-dir: %w", err))
	}
	return keys, nil
}

func runStatus(c *cli.Context) error {
	reps, err := askAgents(c, time.Time{}, statusEvents)
	if err != nil {
		return err
	}
	return writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), statusTables(reps, time.Now())...)
}

// windowsColumn is the agent's time windows, "" when every kind is
// always open.
func windowsColumn(ws []status.WindowInfo) string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return strings.Join(out, ", ")
}

// statusTables are the agents, the partitions in flight and the recent
// events of the region, from the agents' reports.
func statusTables(reps []status.Report, now time.Time) []table {
	agents := table{Name: "agents", Columns: []string{"Host", "Site", "State", "Partition", "Version", "Last Heard", "Watch", "Advise", "Excluded", "Demand", "Windows", "Oscillations"}}
	answered := map[string]status.Report{}
	for _, r := range reps {
		answered[r.Host] = r
	}
	// Members the answering agents hear, with the latest time heard.
	heard := map[string]status.MemberInfo{}
	for _, r := range reps {
		for _, m := range r.Members {
			if m.Host == r.Host {
				continue
			}
			if h, ok := heard[m.Host]; !ok || m.LastHeard.After(h.LastHeard) {
				heard[m.Host] = m
			}
		}
	}
	hosts := slices.Sorted(func(yield func(string) bool) {
		for h := range answered {
			if !yield(h) {
				return
			}
		}
		for h := range heard {
			if _, ok := answered[h]; !ok && !yield(h) {
				return
			}
		}
	})
	for _, h := range hosts {
		if r, ok := answered[h]; ok {
			part := ""
			if r.Partition != nil {
				part = r.Partition.ID
			}
			agents.Rows = append(agents.Rows, []any{r.Host, r.Site, r.State, part, r.Version, ago(now, r.Now), r.Watch, r.Advise, r.Excluded, r.Demand.String(), windowsColumn(r.Windows), r.Oscillations})
			continue
		}
		m := heard[h]
		agents.Rows = append(agents.Rows, []any{m.Host, m.Site, "no answer", "", m.Version, ago(now, m.LastHeard), false, false, false, "", "", ""})
	}

	parts := table{Name: "partitions", Columns: []string{"ID", "Initiator", "Leader", "Members", "State", "Event", "Kind", "Age"}}
	seen := map[string]bool{}
	for _, r := range reps {
		p := r.Partition
		if p == nil || seen[p.ID] {
			continue
		}
		// The leader's view is the freshest.
		if l, ok := answered[p.Leader]; ok && l.Partition != nil && l.Partition.ID == p.ID {
			p = l.Partition
		}
		seen[p.ID] = true
		age := ""
		if !p.Detected.IsZero() {
			age = now.Sub(p.Detected).Round(time.Second).String()
		}
		parts.Rows = append(parts.Rows, []any{p.ID, p.Initiator, p.Leader, slices.Clone(p.Nodes), p.State, p.Event, p.EventKind, age})
	}

	// The merge arbiter as its agents see it (a voter knows the leader),
	// with the highest Raft term those agents' nodes know (agents that
	// run no raft node cannot say).
	arbiter := table{Name: "arbiter", Columns: []string{"Kind", "Leader", "Term", "Voters", "Seen By"}}
	arbSeen := map[string][]string{}
	arbTerm := map[string]uint64{}
	var arbOrder []string
	arbRow := map[string][]any{}
	for _, r := range reps {
		a := r.Arbiter
		if a == nil {
			continue
		}
		key := a.Kind + "|" + a.Leader + "|" + strings.Join(a.Voters, ",")
		if _, ok := arbRow[key]; !ok {
			arbOrder = append(arbOrder, key)
			voters := slices.Clone(a.Voters)
			if voters == nil {
				voters = []string{}
			}
			arbRow[key] = []any{a.Kind, a.Leader, voters}
		}
		arbSeen[key] = append(arbSeen[key], r.Host)
		arbTerm[key] = max(arbTerm[key], a.Term)
	}
	for _, k := range arbOrder {
		row := arbRow[k]
		term := any("")
		if t := arbTerm[k]; t > 0 {
			term = t
		}
		arbiter.Rows = append(arbiter.Rows, []any{row[0], row[1], term, row[2], strings.Join(arbSeen[k], " ")})
	}

	evs := status.Events(reps)
	if len(evs) > statusEvents {
		evs = evs[len(evs)-statusEvents:]
	}
	events := table{Name: "events", Columns: []string{"Event", "Kind", "Host", "Raised", "Outcome", "Class", "Moves", "Reason"}}
	for _, e := range evs {
		events.Rows = append(events.Rows, []any{e.ID, e.Kind, e.Host, stamp(e.Raised), e.State(), e.Class, e.Moves, e.Reason})
	}
	return []table{agents, controlTable(reps), parts, arbiter, events}
}

// controlTable: the operators' controls as the agents hold them, one row
// per distinct view (more than one: a command has not reached everyone
// yet).
func controlTable(reps []status.Report) table {
	t := table{Name: "control", Columns: []string{"Paused", "Mode", "Host Modes", "Excluded", "Latest", "Seen By"}}
	var order []string
	rows := map[string][]any{}
	seen := map[string][]string{}
	for _, r := range reps {
		v := r.Control
		mode := v.Mode
		if mode == "" {
			mode = "advise_only of each agent"
		}
		var hm []string
		for _, h := range slices.Sorted(maps.Keys(v.HostModes)) {
			hm = append(hm, h+"="+v.HostModes[h])
		}
		excl := slices.Clone(v.Excluded)
		if excl == nil {
			excl = []string{}
		}
		row := []any{v.Paused, mode, strings.Join(hm, " "), excl, stamp(v.Latest)}
		key := fmt.Sprint(row...)
		if _, ok := rows[key]; !ok {
			order = append(order, key)
			rows[key] = row
		}
		seen[key] = append(seen[key], r.Host)
	}
	for _, k := range order {
		t.Rows = append(t.Rows, append(rows[k], strings.Join(seen[k], " ")))
	}
	return t
}

func runEvents(c *cli.Context) error {
	since, err := parseSince(c.String("since"), time.Now())
	if err != nil {
		return usageError(err)
	}
	tr, err := connectCLI(c)
	if err != nil {
		return err
	}
	defer func() { _ = tr.Close() }()
	// Subscribed before the history is asked: no update falls between.
	updates := make(chan journal.Update, 4096)
	if c.Bool("follow") {
		keys, err := cliKeys(c)
		if err != nil {
			return err
		}
		// With keys, an update is shown only when the agent it names
		// signed it, lately, and once (status.UpdateReader).
		window := c.Duration("message-window")
		if window <= 0 {
			return usageError(fmt.Errorf("--message-window %s: must be > 0", window))
		}
		ur := &status.UpdateReader{Keys: keys, Window: window}
		var mu sync.Mutex
		sub, err := tr.Subscribe(bus.EventsSubject(c.String("region")), func(subject string, data []byte) {
			u, why := ur.Open(subject, data, time.Now())
			if why != "" {
				if keys != nil {
					mu.Lock()
					fmt.Fprintf(c.App.ErrWriter, "dvms: an update dropped: %s\n", why)
					mu.Unlock()
				}
				return
			}
			select {
			case updates <- u:
			default: // a reader too slow: the history has it
			}
		})
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	host := c.String("host")
	reps, err := askOn(c, tr, since, 0)
	if err != nil && !(c.Bool("follow") && errors.Is(err, status.ErrNoAgent)) {
		return err
	}
	evs := journal.Touching(status.Events(reps), host)
	if err := writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), eventsTable(evs, c.Bool("steps"))); err != nil {
		return err
	}
	if !c.Bool("follow") {
		return nil
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			if host != "" && u.Host != host && (u.Action == nil || (u.Action.From != host && u.Action.To != host)) {
				continue
			}
			writeUpdate(c.App.Writer, c.String("format"), u)
		}
	}
}

// writeUpdate prints one followed update: a JSON line with -f json, else
// "TIME AGENT EVENT KIND HOST what".
func writeUpdate(w io.Writer, format string, u journal.Update) {
	if format == "json" {
		data, _ := json.Marshal(u)
		fmt.Fprintf(w, "%s\n", data)
		return
	}
	what := u.Record
	if u.Class != "" {
		what += "[" + u.Class + "]" // event-ended[vanished]
	}
	if u.Reason != "" {
		what += ": " + u.Reason
	}
	if a := u.Action; a != nil {
		outcome := a.Outcome
		if a.Class != "" && a.Class != string(node.ReasonNone) {
			outcome += "[" + a.Class + "]" // failed[migration_aborted], done[force_completed]
		}
		what = fmt.Sprintf("%s %s %s -> %s %s %s %s", a.Kind, a.Server, a.From, a.To, outcome, a.RequestID, a.NovaReqID)
		if a.Reason != "" {
			what += ": " + a.Reason
		}
	}
	fmt.Fprintf(w, "%s %s %s %s %s %s\n", u.At.UTC().Format("15:04:05.000"), u.Agent, u.Event, u.Kind, u.Host, what)
}

func runPlans(c *cli.Context) error {
	since, err := parseSince(c.String("since"), time.Now())
	if err != nil {
		return usageError(err)
	}
	reps, err := askAgents(c, since, 0)
	if err != nil {
		return err
	}
	return writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), plansTable(journal.Touching(status.Events(reps), c.String("host"))))
}

// advised: the executor's reason class for an action of advise mode.
const advised = string(node.ReasonAdvise)

// plansTable lists the events whose plan was advised, not executed. An
// agent in advise mode raises its event again after each backoff and
// plans it again: a plan already listed (same event kind and host, same
// moves with the same re-check results) is one row, the latest event's,
// with how many times it was advised and when first. A plan that differs
// in anything (a move, a destination, a re-check) is a row of its own.
// A plan an operator approved or rejected (dvms plans approve|reject) is
// no longer listed, nor the same plan advised before it.
func plansTable(es []journal.Entry) table {
	t := table{Name: "plans", Columns: []string{"Event", "Kind", "Host", "Planned", "Leader", "Reason", "Moves", "Advised", "First Planned"}}
	rowOf := map[string]int{} // plan key -> row
	for _, e := range es {
		var moves []orderedMap
		var key []string
		for _, a := range e.Actions {
			if e.Approval != nil && !a.Ended.Before(e.Approval.At) {
				continue // recorded at or after the decision: its re-check, its execution
			}
			if a.Class != advised && !slices.ContainsFunc(e.Actions, func(b journal.Action) bool { return b.Class == advised }) {
				continue
			}
			check := "holds"
			if a.Class != advised {
				check = "would be skipped: " + a.Reason
			}
			moves = append(moves, orderedMap{{"action", a.Kind}, {"server", a.Server}, {"from", a.From}, {"to", "-> " + a.To}, {"recheck", check}})
			key = append(key, strings.Join([]string{a.Kind, a.Server, a.From, a.To, a.Class}, " "))
		}
		if len(moves) == 0 {
			continue
		}
		slices.Sort(key)
		k := e.Kind + " " + e.Host + "\n" + strings.Join(key, "\n")
		if e.Decided() {
			if i, ok := rowOf[k]; ok {
				t.Rows[i] = nil
				delete(rowOf, k)
			}
			continue
		}
		if i, ok := rowOf[k]; ok {
			first, n := t.Rows[i][8], t.Rows[i][7].(int)
			t.Rows[i] = []any{e.ID, e.Kind, e.Host, stampPtr(e.Planned), e.Leader, e.PlanReason, moves, n + 1, first}
			continue
		}
		rowOf[k] = len(t.Rows)
		t.Rows = append(t.Rows, []any{e.ID, e.Kind, e.Host, stampPtr(e.Planned), e.Leader, e.PlanReason, moves, 1, stampPtr(e.Planned)})
	}
	t.Rows = slices.DeleteFunc(t.Rows, func(r []any) bool { return r == nil })
	return t
}

// parseSince reads --since: a duration before now or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (10m) or an RFC 3339 time", s)
	}
	return t, nil
}

func eventsTable(es []journal.Entry, steps bool) table {
	t := table{Name: "events", Columns: []string{"Event", "Kind", "Host", "Raised", "Planned", "Ended", "Outcome", "Class", "Reason", "Partition", "Size", "Leader", "Actions"}}
	if steps {
		t.Columns = append(t.Columns, "Steps")
	}
	for _, e := range es {
		var acts []orderedMap
		for _, a := range e.Actions {
			acts = append(acts, orderedMap{
				{"action", a.Kind}, {"server", a.Server}, {"from", a.From}, {"to", "-> " + a.To},
				{"outcome", a.Outcome}, {"class", a.Class}, {"request_id", a.RequestID}, {"nova_request_id", a.NovaReqID}, {"reason", a.Reason},
			})
		}
		if acts == nil {
			acts = []orderedMap{}
		}
		row := []any{e.ID, e.Kind, e.Host, stamp(e.Raised), stampPtr(e.Planned), stampPtr(e.Ended), e.State(), e.Class, e.Reason,
			e.Partition, e.Size, e.Leader, acts}
		if steps {
			var ss []string
			for _, s := range e.Steps {
				line := s.At.UTC().Format("15:04:05.000") + " " + s.Agent + " " + s.Record
				if s.Class != "" {
					line += "[" + s.Class + "]"
				}
				if s.Reason != "" {
					line += ": " + s.Reason
				}
				ss = append(ss, line)
			}
			if ss == nil {
				ss = []string{}
			}
			row = append(row, ss)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

// ago says how long before now t was, in whole seconds.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return strconv.Itoa(int(d/time.Second)) + "s ago"
}
