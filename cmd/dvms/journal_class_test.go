package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/status"
)

// An event's end class travels with its journal entry (`dvms events -f
// json` gets a "Class" field beside the unchanged "Outcome" and
// "Reason"), and an entry of an older agent, which wrote no class, still
// reads: its class is derived from its outcome and reason, or "unknown"
// when its text says nothing known.
func TestJournalEndClassAndOlderAgents(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := journal.New("c1", func() time.Time { return now })
	ev := scheduler.Event{ID: "c1-1", Kind: scheduler.Overload, Host: "c1", Detected: now}
	j.Record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev, Partition: "p1", Size: 1})
	j.Record(scheduler.Record{Kind: scheduler.RecEventEnded, Event: ev, Partition: "p1", Size: 1,
		Outcome: scheduler.Aborted, Class: scheduler.EndVanished, Reason: "words that do not say it"})
	mine := status.Events([]status.Report{{Events: j.Snapshot()}})
	if len(mine) != 1 || mine[0].Class != "vanished" || mine[0].Outcome != "aborted" || mine[0].Steps[1].Class != "vanished" {
		t.Fatalf("this version's entry: %+v", mine)
	}

	// As an older agent sends them: no "class" anywhere.
	const older = `[
	 {"id":"c2-1","kind":"overload","host":"c2","agent":"c2","raised":"2026-01-01T00:00:01Z","ended":"2026-01-01T00:00:05Z",
	  "outcome":"aborted","reason":"0 done, 1 skipped, 0 failed; nothing moved: the event no longer holds (its host's own measurement, or Nova for a drain)"},
	 {"id":"c2-2","kind":"overload","host":"c2","agent":"c2","raised":"2026-01-01T00:00:02Z","ended":"2026-01-01T00:00:06Z",
	  "outcome":"aborted","reason":"partition timeout: no word from leader c7"},
	 {"id":"c2-3","kind":"overload","host":"c2","agent":"c2","raised":"2026-01-01T00:00:03Z","ended":"2026-01-01T00:00:07Z",
	  "outcome":"aborted","reason":"something a future or past version says"},
	 {"id":"c2-4","kind":"overload","host":"c2","agent":"c2","raised":"2026-01-01T00:00:04Z"}]`
	var olds []journal.Entry
	if err := json.Unmarshal([]byte(older), &olds); err != nil {
		t.Fatal(err)
	}
	es := status.Events([]status.Report{{Events: olds}})
	want := map[string]string{"c2-1": "vanished", "c2-2": "partition_timeout", "c2-3": "unknown", "c2-4": ""}
	for _, e := range es {
		if e.Class != want[e.ID] {
			t.Errorf("older agent's %s (%s %q): class %q, want %q", e.ID, e.Outcome, e.Reason, e.Class, want[e.ID])
		}
	}

	// -f json: the new field beside the old ones, which keep their names.
	var b bytes.Buffer
	if err := writeTables(&b, "json", nil, eventsTable(es, false)); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b.Bytes(), &rows); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	row := rows[0]
	if row["Class"] != "vanished" || row["Outcome"] != "aborted" || !strings.HasPrefix(row["Reason"].(string), "0 done") {
		t.Errorf("json row %v", row)
	}
}
