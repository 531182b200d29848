package journal

import (
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// The journal keeps the last MaxEvents events.
func TestJournalIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := New("c1", func() time.Time { return now })
	for i := range MaxEvents + 5 {
		now = now.Add(time.Second)
		j.Record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: scheduler.Event{ID: fmt.Sprint("e", i), Detected: now}, Partition: fmt.Sprint("p", i)})
	}
	es := j.Snapshot()
	if len(es) != MaxEvents || es[0].ID != "e5" || len(j.parts) != MaxEvents {
		t.Fatalf("%d events from %s, %d partitions; want %d from e5", len(es), es[0].ID, len(j.parts), MaxEvents)
	}
}
