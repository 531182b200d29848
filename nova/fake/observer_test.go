package fake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// The observer must be able to fail: each case drives the cloud through
// a sequence a correct scheduler never produces and expects exactly the
// violations named.
func TestObserverCatchesBadSequences(t *testing.T) {
	plan := nova.WithRequestID(context.Background(), "req-00000000-0000-4000-8000-0000000000b1")
	for _, tc := range []struct {
		name  string
		run   func(t *testing.T, c *fake.Cloud, clock *fake.ManualClock)
		kinds []string
		text  string
	}{
		{"plan overloads destination", func(t *testing.T, c *fake.Cloud, _ *fake.ManualClock) {
			mustAdd(t, c, server("busy", "compute-2", 4, 1024), server("hot", "compute-1", 2, 1024))
			_ = c.SetDemand("busy", nova.Demand{CPU: 7, RAMMB: 1024})
			_ = c.SetDemand("hot", nova.Demand{CPU: 2, RAMMB: 1024})
			readDemand(t, c, "compute-1", "compute-2") // the executor's re-check
			if _, err := c.LiveMigrate(plan, "hot", "compute-2"); err != nil {
				t.Fatal(err)
			}
		}, []string{fake.KindOverload}, "overloads destination compute-2"},
		{"plan overloads a destination it read, read again by another", func(t *testing.T, c *fake.Cloud, _ *fake.ManualClock) {
			mustAdd(t, c, server("busy", "compute-2", 4, 1024), server("hot", "compute-1", 2, 1024))
			_ = c.SetDemand("busy", nova.Demand{CPU: 7, RAMMB: 1024})
			_ = c.SetDemand("hot", nova.Demand{CPU: 2, RAMMB: 1024})
			readDemandAs(t, plan, c, "compute-1", "compute-2") // the re-check saw 7 + 2
			readDemand(t, c, "compute-2")                      // the monitor, no change
			if _, err := c.LiveMigrate(plan, "hot", "compute-2"); err != nil {
				t.Fatal(err)
			}
		}, []string{fake.KindOverload}, "overloads destination compute-2"},
		// Demand the plan read decides, not which hosts changed: another
		// server of the source changing, or the plan's own move ending on
		// the destination, leaves the overload the plan's (both passed as
		// drift when the observer compared change counters of hosts).
		{"plan overloads destination, another server of its source changed", func(t *testing.T, c *fake.Cloud, _ *fake.ManualClock) {
			mustAdd(t, c, server("busy", "compute-2", 4, 1024), server("hot", "compute-1", 2, 1024), server("other", "compute-1", 1, 512))
			_ = c.SetDemand("busy", nova.Demand{CPU: 7})
			_ = c.SetDemand("hot", nova.Demand{CPU: 2})
			readDemandAs(t, plan, c, "compute-1", "compute-2") // the re-check saw 7 + 2
			_ = c.SetDemand("other", nova.Demand{CPU: 3})      // not moving, not counted on compute-2
			if _, err := c.LiveMigrate(plan, "hot", "compute-2"); err != nil {
				t.Fatal(err)
			}
		}, []string{fake.KindOverload}, "as the plan last read it 9.00 cores"},
		{"plan overloads destination after its own move there ended", func(t *testing.T, c *fake.Cloud, clock *fake.ManualClock) {
			mustAdd(t, c, server("d", "compute-2", 1, 512), server("a", "compute-1", 2, 512), server("b", "compute-3", 2, 512))
			for _, id := range []string{"d", "a", "b"} {
				_ = c.SetDemand(id, nova.Demand{CPU: 3})
			}
			readDemandAs(t, plan, c, "compute-1", "compute-2", "compute-3")
			// 3 + 3 fits in 8; once a is on compute-2, 3 + 3 + 3 does not.
			if _, err := c.LiveMigrate(plan, "a", "compute-2"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
			if _, err := c.LiveMigrate(plan, "b", "compute-2"); err != nil {
				t.Fatal(err)
			}
		}, []string{fake.KindOverload}, "overloads destination compute-2 with b"},
		{"moves in flight count towards the destination", func(t *testing.T, c *fake.Cloud, _ *fake.ManualClock) {
			mustAdd(t, c, server("a", "compute-1", 2, 1024), server("b", "compute-3", 2, 1024), server("d", "compute-2", 1, 512))
			_ = c.SetDemand("a", nova.Demand{CPU: 4})
			_ = c.SetDemand("b", nova.Demand{CPU: 4})
			_ = c.SetDemand("d", nova.Demand{CPU: 1})
			readDemand(t, c, "compute-1", "compute-2", "compute-3")
			for _, id := range []string{"a", "b"} { // 1 + 4 fits, 1 + 4 + 4 does not
				if _, err := c.LiveMigrate(context.Background(), id, "compute-2"); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{fake.KindOverload}, "overloads destination compute-2 with b"},
		{"migrated twice in one plan", func(t *testing.T, c *fake.Cloud, clock *fake.ManualClock) {
			mustAdd(t, c, server("s", "compute-1", 1, 512))
			if _, err := c.LiveMigrate(plan, "s", "compute-2"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Second)
			if _, err := c.LiveMigrate(plan, "s", "compute-3"); err != nil {
				t.Fatal(err)
			}
		}, []string{fake.KindMigratedTwice}, "migrated twice"},
		{"placement overcommitted by an inventory change", func(t *testing.T, c *fake.Cloud, _ *fake.ManualClock) {
			mustAdd(t, c, server("s", "compute-1", 6, 512))
			c.AddHost(hostSpec("compute-1", 4, 16384)) // 6 VCPU allocated on 4
			c.AddHost(hostSpec("compute-1", 3, 16384)) // still over: reported once
		}, []string{fake.KindOvercommit}, "compute-1 overcommitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock := newRawCloud()
			tc.run(t, c, clock)
			v := c.Violations()
			var kinds []string
			for _, x := range v {
				kinds = append(kinds, x.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Fatalf("violations %v, want kinds %v", v, tc.kinds)
			}
			if !strings.Contains(v[0].String(), tc.text) {
				t.Errorf("violation %q does not say %q", v[0], tc.text)
			}
			if c.ServersLost() != 0 {
				t.Error("servers lost")
			}
		})
	}
}

// Demand that changed after the executor last read it is drift: reported
// by Drift, not as a violation.
func TestObserverTellsDriftApart(t *testing.T) {
	c, _ := newCloud(t)
	mustAdd(t, c, server("busy", "compute-2", 4, 1024), server("late", "compute-1", 1, 512))
	_ = c.SetDemand("busy", nova.Demand{CPU: 6})
	_ = c.SetDemand("late", nova.Demand{CPU: 1})
	readDemand(t, c, "compute-1", "compute-2")   // 6 + 1 fits in 8
	_ = c.SetDemand("busy", nova.Demand{CPU: 8}) // after the re-check
	if _, err := c.LiveMigrate(context.Background(), "late", "compute-2"); err != nil {
		t.Fatal(err)
	}
	if d := c.Drift(); len(d) != 1 || d[0].Kind != fake.KindOverload || !strings.Contains(d[0].Message, "changed since") {
		t.Fatalf("drift %v", d)
	}
}

// A plan answers for the demand it read: a read by someone else (the
// destination's monitor) after the plan's re-check and after the demand
// moved does not make the drift the plan's fault. Seen at 1,000 hosts:
// the re-check read the destination at 15.05 of 16 cores, its demand rose
// to 15.91 and its monitor read it, then the move started.
func TestObserverDriftSeenOnlyByAnotherReader(t *testing.T) {
	c, _ := newCloud(t)
	plan := nova.WithRequestID(context.Background(), "req-00000000-0000-4000-8000-0000000000d1")
	mustAdd(t, c, server("busy", "compute-2", 4, 1024), server("late", "compute-1", 1, 512))
	_ = c.SetDemand("busy", nova.Demand{CPU: 6})
	_ = c.SetDemand("late", nova.Demand{CPU: 1})
	readDemandAs(t, plan, c, "compute-1", "compute-2") // the re-check: 6 + 1 fits in 8
	_ = c.SetDemand("busy", nova.Demand{CPU: 8})       // after the re-check
	readDemand(t, c, "compute-2")                      // the monitor
	if _, err := c.LiveMigrate(plan, "late", "compute-2"); err != nil {
		t.Fatal(err)
	}
	if v := c.Violations(); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	if d := c.Drift(); len(d) != 1 || d[0].Kind != fake.KindOverload || !strings.Contains(d[0].Message, "changed since") {
		t.Fatalf("drift %v", d)
	}
}

// A plan answers for the demand it read of the servers it already moves
// to a destination too: one of them whose demand rose after the plan's
// re-check (while it waits for its source's migration lane) makes the
// next move there drift, not a violation (dvms simulate --workload
// saturated, issue 11 point 6).
func TestObserverDriftOfAMoveInFlight(t *testing.T) {
	c, _ := newCloud(t)
	plan := nova.WithRequestID(context.Background(), "req-00000000-0000-4000-8000-0000000000d2")
	mustAdd(t, c, server("first", "compute-1", 1, 512), server("blocker", "compute-1", 1, 512),
		server("second", "compute-3", 1, 512), server("busy", "compute-2", 4, 1024))
	_ = c.SetDemand("busy", nova.Demand{CPU: 5})
	_ = c.SetDemand("first", nova.Demand{CPU: 1})
	_ = c.SetDemand("second", nova.Demand{CPU: 1})
	readDemandAs(t, plan, c, "compute-1", "compute-2", "compute-3") // 5 + 1 + 1 fits in 8
	if _, err := c.LiveMigrate(plan, "first", "compute-2"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDemand("first", nova.Demand{CPU: 3}) // in flight, after the re-check
	readDemand(t, c, "compute-1")                 // its source's monitor
	if _, err := c.LiveMigrate(plan, "second", "compute-2"); err != nil {
		t.Fatal(err)
	}
	if v := c.Violations(); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	if d := c.Drift(); len(d) != 1 || !strings.Contains(d[0].Message, "second") {
		t.Fatalf("drift %v", d)
	}
}

// A correct sequence (moves, failures, shelves, deletes) leaves the
// observer and the audit silent: newCloud's cleanup checks both.
func TestObserverQuietOnCorrectSequence(t *testing.T) {
	c, clock := newCloud(t)
	ctx := nova.WithRequestID(context.Background(), "req-00000000-0000-4000-8000-0000000000c1")
	mustAdd(t, c, server("a", "compute-1", 2, 2048), server("b", "compute-1", 2, 2048), server("c", "compute-2", 1, 512))
	readDemand(t, c, "compute-1", "compute-2", "compute-3")
	for _, mv := range [][2]string{{"a", "compute-2"}, {"b", "compute-3"}} {
		if _, err := c.LiveMigrate(ctx, mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetServiceStatus(ctx, "compute-1", true, "drain")
	if _, err := c.LiveMigrate(context.Background(), "c", "compute-1"); err != nil { // ends in error
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	_, _ = c.Shelve(ctx, "c")
	_, _ = c.ShelveOffload(ctx, "c")
	_ = c.DeleteServer("a")
	if st := c.Stats(); st.Completed != 2 || st.Failed != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

func readDemand(t *testing.T, c *fake.Cloud, hosts ...string) {
	t.Helper()
	readDemandAs(t, context.Background(), c, hosts...)
}

// readDemandAs reads the demand of hosts with ctx (a plan's request id).
func readDemandAs(t *testing.T, ctx context.Context, c *fake.Cloud, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		if _, err := c.Demand(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
}
