//go:build functional

package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 9, "Done when" 2: a host disabled with the openstack CLI starts
// its first live migration within drainFirstWithin and is empty within
// drainSlowdown x the time Nova spent migrating (the union of the
// migrations' created -> updated intervals) + drainSlack, with no failed
// migration.
const (
	drainFirstWithin = 3 * time.Second
	drainSlowdown    = 1.15
	drainSlack       = 5 * time.Second
)

// drainFigures are a drain's timings, from Nova's records (`openstack
// server migration list --host`) and two instants the test saw: the
// disable (nova-api's log) and the host found empty.
type drainFigures struct {
	host        string
	servers     int
	firstDelay  time.Duration // first migration created - disable
	lastDone    time.Duration // last migration updated - disable
	toEmpty     time.Duration // host seen empty - disable
	union, sum  time.Duration // of the completed migrations' created -> updated
	idleBetween time.Duration // first created -> last updated, minus the union
	failed      []string      // migrations that did not complete
	moved       map[string]bool
}

// drainFiguresOf reads the migrations of servers (ids) off host.
func drainFiguresOf(rows []migrationRow, host string, ids []string, disabled, empty time.Time) (drainFigures, error) {
	d := drainFigures{host: host, servers: len(ids), toEmpty: empty.Sub(disabled), moved: map[string]bool{}}
	var spans []span
	var first, last time.Time
	for _, m := range rows {
		if m.Source != host || !slices.Contains(ids, m.Server) {
			continue
		}
		c, err1 := novaTime(m.CreatedAt)
		u, err2 := novaTime(m.UpdatedAt)
		if err := errors.Join(err1, err2); err != nil {
			return d, fmt.Errorf("migration %d: %w", m.ID, err)
		}
		if first.IsZero() || c.Before(first) {
			first = c
		}
		if u.After(last) {
			last = u
		}
		if m.Type != "live-migration" || m.Status != "completed" {
			d.failed = append(d.failed, fmt.Sprintf("%d(%s %s)", m.ID, m.Type, m.Status))
			continue
		}
		d.moved[m.Server] = true
		spans = append(spans, span{c, u})
	}
	if first.IsZero() {
		return d, fmt.Errorf("no migration off %s in the migration list", host)
	}
	d.firstDelay, d.lastDone = first.Sub(disabled), last.Sub(disabled)
	d.union, d.sum = unionOf(spans), sumOf(spans)
	d.idleBetween = last.Sub(first) - d.union
	return d, nil
}

func (d drainFigures) limit() time.Duration {
	return time.Duration(drainSlowdown*float64(d.union)) + drainSlack
}

func (d drainFigures) String() string {
	return fmt.Sprintf("%d servers; first migration created +%s after the disable; last migration updated +%s; host seen empty +%s; "+
		"union of the migrations' created->updated intervals %s (sum %s, host idle between migrations %s); "+
		"limit %.2f x union + %s = %s; %d failed migrations %v",
		d.servers, d.firstDelay.Round(time.Millisecond), d.lastDone.Round(time.Millisecond), d.toEmpty.Round(100*time.Millisecond),
		d.union, d.sum, d.idleBetween, drainSlowdown, drainSlack, d.limit().Round(10*time.Millisecond), len(d.failed), d.failed)
}

// problems are the checks the drain failed.
func (d drainFigures) problems() []string {
	var out []string
	if len(d.moved) != d.servers {
		out = append(out, fmt.Sprintf("%d servers left %s but the migration list shows %d completed live migrations", d.servers, d.host, len(d.moved)))
	}
	if d.firstDelay > drainFirstWithin {
		out = append(out, fmt.Sprintf("first migration off %s created %s after the disable, more than %s", d.host, d.firstDelay.Round(time.Millisecond), drainFirstWithin))
	}
	if d.toEmpty > d.limit() {
		out = append(out, fmt.Sprintf("%s empty %s after the disable, more than %.2f x %s (Nova's time migrating) + %s = %s: the host sat idle between migrations",
			d.host, d.toEmpty.Round(100*time.Millisecond), drainSlowdown, d.union, drainSlack, d.limit().Round(10*time.Millisecond)))
	}
	if len(d.failed) > 0 {
		out = append(out, fmt.Sprintf("%d migrations off %s did not complete: %v", len(d.failed), d.host, d.failed))
	}
	return out
}

// novaTime parses a time of Nova's API: UTC, written without a zone.
func novaTime(v string) (time.Time, error) {
	v = strings.TrimSuffix(strings.TrimSuffix(v, "Z"), "+00:00")
	return time.ParseInLocation("2006-01-02T15:04:05.999999", v, time.UTC)
}

// span is one migration's interval in Nova's records.
type span struct{ from, to time.Time }

// unionOf is the total time covered by at least one span.
func unionOf(spans []span) time.Duration {
	s := slices.Clone(spans)
	slices.SortFunc(s, func(a, b span) int { return a.from.Compare(b.from) })
	var total time.Duration
	var cur span
	for i, x := range s {
		switch {
		case i == 0:
			cur = x
		case !x.from.After(cur.to):
			if x.to.After(cur.to) {
				cur.to = x.to
			}
		default:
			total += cur.to.Sub(cur.from)
			cur = x
		}
	}
	if len(s) > 0 {
		total += cur.to.Sub(cur.from)
	}
	return total
}

func sumOf(spans []span) time.Duration {
	var total time.Duration
	for _, x := range spans {
		total += x.to.Sub(x.from)
	}
	return total
}

// TestFunctionalDrainFigures needs no cloud: it feeds the drain checks
// migration lists as `openstack server migration list -f json` prints
// them, so that each check is seen to fail on the drain it is meant to
// catch, and Nova's zone-less UTC times are read as UTC whatever the
// machine's zone.
func TestFunctionalDrainFigures(t *testing.T) {
	disabled := time.Date(2026, 11, 23, 17, 26, 21, 768e6, time.UTC).In(time.FixedZone("UTC+2", 2*3600))
	at := func(s float64) string {
		// Nova keeps whole seconds (MariaDB truncates).
		return disabled.Add(time.Duration(s * float64(time.Second))).UTC().Truncate(time.Second).Format("2006-01-02T15:04:05.000000")
	}
	row := func(id int, server string, from, to float64, status string) migrationRow {
		return migrationRow{ID: id, Server: server, Source: "compute-1", Dest: "compute-2", Status: status,
			Type: "live-migration", CreatedAt: at(from), UpdatedAt: at(to)}
	}
	ids := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name  string
		rows  []migrationRow
		empty float64 // s after the disable
		want  []string
	}{
		{"pipelined: queued behind each other, no gap", []migrationRow{
			row(1, "a", 1, 11, "completed"), row(2, "b", 2, 21, "completed"), row(3, "c", 3, 31, "completed"),
		}, 32, nil},
		{"first migration late", []migrationRow{
			row(1, "a", 5, 14, "completed"), row(2, "b", 5, 24, "completed"), row(3, "c", 6, 34, "completed"),
		}, 35, []string{"first migration off compute-1 created 4.232s after the disable, more than 3s"}},
		{"host idle between migrations", []migrationRow{
			row(1, "a", 1, 11, "completed"), row(2, "b", 18, 28, "completed"), row(3, "c", 35, 45, "completed"),
		}, 46, []string{"compute-1 empty 46s after the disable, more than 1.15 x 30s (Nova's time migrating) + 5s = 39.5s"}},
		{"a failed migration, retried", []migrationRow{
			row(1, "a", 1, 11, "completed"), row(2, "b", 2, 5, "error"), row(3, "b", 11, 21, "completed"), row(4, "c", 12, 31, "completed"),
		}, 32, []string{"1 migrations off compute-1 did not complete: [2(live-migration error)]"}},
		{"a server left without a live migration", []migrationRow{
			row(1, "a", 1, 11, "completed"), row(2, "b", 2, 21, "completed"),
		}, 22, []string{"3 servers left compute-1 but the migration list shows 2 completed"}},
		{"rows of other hosts and servers ignored", []migrationRow{
			row(1, "a", 1, 11, "completed"), row(2, "b", 2, 21, "completed"), row(3, "c", 3, 31, "completed"),
			row(4, "z", 0, 2, "error"), {ID: 5, Server: "a", Source: "compute-9", Status: "error", Type: "live-migration", CreatedAt: at(-99), UpdatedAt: at(-98)},
		}, 32, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := drainFiguresOf(tc.rows, "compute-1", ids, disabled, disabled.Add(time.Duration(tc.empty*float64(time.Second))))
			if err != nil {
				t.Fatal(err)
			}
			got := d.problems()
			t.Logf("%s -> %q", d, got)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %q, want %q...", got[i], tc.want[i])
				}
			}
		})
	}
	if _, err := drainFiguresOf(nil, "compute-1", ids, disabled, disabled); err == nil {
		t.Error("no migration at all was not an error")
	}
}
