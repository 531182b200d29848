package node_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// requests sums the requests the cloud's meter counted.
func requests(c *fake.Cloud) int64 {
	var n int64
	for _, v := range c.Meter().Snapshot().Counts() {
		n += v
	}
	return n
}

// A drain's maintenance actions: s1 on the drained h1 moves to h2 by the
// first of its maintenance actions that works, and the result records
// the action used and why.
func TestDrainMaintenanceActions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		meta    string // s1's dvms:maintenance_action ("" none)
		cfg     string // ExecConfig.MaintenanceActions
		noLive  bool   // s1 cannot live-migrate
		faults  bool   // every migration fails
		kind    scheduler.EventKind
		want    string // kind[class]: reason part
		host    string // where s1 ends
		status  string
		actions []string // s1's instance actions, oldest first
	}{
		{name: "default live", want: "live-migrate[none]", host: "h2", status: nova.StatusActive,
			actions: []string{"live-migration"}},
		{name: "cold chosen by the server", meta: "cold_migrate", want: "cold-migrate[maintenance_action]: maintenance action cold-migrate (dvms:maintenance_action=cold_migrate)",
			host: "h2", status: nova.StatusActive, actions: []string{"migrate", "confirmResize"}},
		{name: "cold chosen by the configuration", cfg: "cold_migrate", want: "cold-migrate[maintenance_action]: maintenance action cold-migrate (maintenance_actions=cold_migrate)",
			host: "h2", status: nova.StatusActive, actions: []string{"migrate", "confirmResize"}},
		{name: "falls back after Nova's pre-check", meta: "live_migrate,cold_migrate", noLive: true,
			want: "cold-migrate[fallback]: maintenance action cold-migrate (dvms:maintenance_action=live_migrate,cold_migrate); after live-migrate: ",
			host: "h2", status: nova.StatusActive, actions: []string{"live-migration", "migrate", "confirmResize"}},
		{name: "falls back twice", meta: "live_migrate, cold_migrate, shelve_offload", faults: true,
			want: "shelve-offload[fallback]: maintenance action shelve-offload",
			host: "", status: nova.StatusShelvedOffloaded, actions: []string{"live-migration", "migrate", "shelve", "shelveOffload"}},
		{name: "no fallback by default", noLive: true, want: "live-migrate[failed]: ", host: "h1", status: nova.StatusActive,
			actions: []string{"live-migration"}},
		{name: "a failed cold migration loses nothing", meta: "cold_migrate", faults: true,
			want: "cold-migrate[failed]: cold-migrate s1 to h2: migration", host: "h1", status: nova.StatusActive, actions: []string{"migrate"}},
		{name: "shelve chosen", meta: "shelve_offload", want: "shelve-offload[maintenance_action]", host: "", status: nova.StatusShelvedOffloaded,
			actions: []string{"shelve", "shelveOffload"}},
		{name: "notify", meta: "notify", want: "notify[left_for_owner]: left on h1 for its owner", host: "h1", status: nova.StatusActive},
		{name: "relief only live-migrates", meta: "notify", kind: scheduler.Overload, want: "live-migrate[none]", host: "h2", status: nova.StatusActive,
			actions: []string{"live-migration"}},
		{name: "a typo falls back to the default", meta: "cold_migrat", cfg: "cold_migrate", want: "cold-migrate[maintenance_action]: maintenance action cold-migrate (maintenance_actions=cold_migrate)",
			host: "h2", status: nova.StatusActive, actions: []string{"migrate", "confirmResize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			w.server("s1", "h1", 2, nil)
			w.server("s2", "h1", 7, nil) // h1 overloaded, for the relief case
			ctx := context.Background()
			if tc.meta != "" {
				if err := w.cloud.SetServerMetadata(ctx, "s1", nova.MetaMaintenanceAction, tc.meta); err != nil {
					t.Fatal(err)
				}
			}
			if tc.noLive {
				if err := w.cloud.SetNoLiveMigration("s1", "PCI passthrough device"); err != nil {
					t.Fatal(err)
				}
			}
			kind := tc.kind
			if kind == scheduler.NoEvent {
				kind = scheduler.Maintenance
				_ = w.cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance")
			}
			if tc.faults {
				if err := w.cloud.SetMigrationFailure("s1", "disk copy failed"); err != nil {
					t.Fatal(err)
				}
			}
			cfg := fastExec()
			cfg.MaintenanceActions = tc.cfg
			e := w.executor(cfg, w.cloud, w.cloud, w.clock)
			before := requests(w.cloud)
			res := e.Execute(ctx, scheduler.Event{ID: "ev-1", Kind: kind, Host: "h1"},
				scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}})
			t.Logf("%d Nova requests", requests(w.cloud)-before)
			ar := res.Actions[0]
			got := ar.Action.Kind.String() + "[" + string(ar.Class) + "]: " + ar.Reason
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("result %q, want prefix %q", got, tc.want)
			}
			s, err := w.cloud.Server(ctx, "s1")
			if err != nil || s.Host != tc.host || s.Status != tc.status {
				t.Fatalf("s1 %s on %q (%v), want %s on %q", s.Status, s.Host, err, tc.status, tc.host)
			}
			var names []string
			for _, a := range w.cloud.Actions("s1") {
				names = append(names, a.Name)
			}
			if !slices.Equal(names, tc.actions) {
				t.Fatalf("instance actions %v, want %v", names, tc.actions)
			}
			if a := w.cloud.Audit(); len(a) > 0 {
				t.Fatalf("audit: %v", a)
			}
		})
	}
}

// A drain whose server is left for its owner ends left_for_owners
// (aborted, no re-plan): not drained, not failed, not a retry storm. The
// server left, and the one shelved instead, hold no room on their
// planned destination: the next move into it (h2 has room for one more)
// runs.
func TestDrainNotifyEnds(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 1, nil)
	w.server("s2", "h1", 1, nil)
	w.server("s3", "h1", 1, nil)
	for _, id := range []string{"f1", "f2", "f3"} {
		w.server(id, "h2", 0.1, nil) // 6 of h2's 8 VCPU
	}
	ctx := context.Background()
	if err := w.cloud.SetServerMetadata(ctx, "s2", nova.MetaMaintenanceAction, "notify"); err != nil {
		t.Fatal(err)
	}
	if err := w.cloud.SetServerMetadata(ctx, "s3", nova.MetaMaintenanceAction, "shelve_offload"); err != nil {
		t.Fatal(err)
	}
	_ = w.cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance")
	e := w.executor(fastExec(), w.cloud, w.cloud, w.clock)
	res := e.Execute(ctx, scheduler.Event{ID: "ev-1", Kind: scheduler.Maintenance, Host: "h1"},
		scheduler.Plan{Steps: [][]scheduler.Action{{move("s2", "h1", "h2", 1), move("s3", "h1", "h2", 1)}, {move("s1", "h1", "h2", 1)}}})
	o, c, reason, replan := node.PlanOutcome(res, false, true, func() bool { return false })
	if o != scheduler.Aborted || c != scheduler.EndLeftForOwners || replan || res.Done != 2 {
		t.Fatalf("outcome %s %s %q replan %v (done %d), want aborted left_for_owners, no re-plan", o, c, reason, replan, res.Done)
	}
	if c.Outcome() != scheduler.Aborted {
		t.Fatalf("class %s belongs to %s", c, c.Outcome())
	}
	left, err := w.cloud.Servers(ctx, "h1")
	if err != nil || len(left) != 1 || left[0].ID != "s2" || !nova.LeftForOwners(left) {
		t.Fatalf("h1 holds %+v (%v), want s2 only, left for its owner", left, err)
	}
}

// lockAfterLive locks the server once Nova accepted its live migration.
type lockAfterLive struct{ *fake.Cloud }

func (c lockAfterLive) LiveMigrate(ctx context.Context, id, dest string) (nova.Receipt, error) {
	rc, err := c.Cloud.LiveMigrate(ctx, id, dest)
	if err == nil {
		err = c.SetLocked(id, true)
	}
	return rc, err
}

// A fallback the re-check does not let run (the server got locked while
// its live migration failed) leaves the failure recorded, with why
// nothing more ran; nothing else is sent.
func TestDrainFallbackSkippedKeepsTheFailure(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 2, nil)
	ctx := context.Background()
	if err := w.cloud.SetServerMetadata(ctx, "s1", nova.MetaMaintenanceAction, "live_migrate,cold_migrate"); err != nil {
		t.Fatal(err)
	}
	if err := w.cloud.SetNoLiveMigration("s1", "PCI passthrough device"); err != nil {
		t.Fatal(err)
	}
	_ = w.cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance")
	e := w.executor(fastExec(), lockAfterLive{w.cloud}, w.cloud, w.clock)
	res := e.Execute(ctx, scheduler.Event{ID: "ev-1", Kind: scheduler.Maintenance, Host: "h1"},
		scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}})
	ar := res.Actions[0]
	if ar.Outcome != node.ActionFailed || ar.Action.Kind != scheduler.LiveMigrate || ar.Class != node.ReasonFailed ||
		!strings.Contains(ar.Reason, "next action cold_migrate not run: server is locked [server_changed]") {
		t.Fatalf("result %s %s [%s]: %q, want the live migration's failure and the skipped fallback", ar.Outcome, ar.Action.Kind, ar.Class, ar.Reason)
	}
	var names []string
	for _, a := range w.cloud.Actions("s1") {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"live-migration"}) {
		t.Fatalf("instance actions %v, want the live migration only", names)
	}
}
