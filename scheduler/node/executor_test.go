package node_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// execWorld is a fake cloud of hosts h1..hN (8 cores, 16 GiB, allocation
// ratio 1 so placement is easy to fill) on a clock 200 times faster than
// the wall clock.
type execWorld struct {
	t     *testing.T
	clock *node.Scaled
	cloud *fake.Cloud
}

// execScale: the executor tests' clock runs execScale x the wall's,
// whether or not the executor keeps up with it: at 200 x, 4 ms of a
// starved goroutine was 0.75 s of it, and under two unit tiers side by
// side the executor started a queued move after its predecessor ended,
// a re-check's reads outlasted their timeout, an abort came 13 s late.
const execScale = 50

func newExecWorld(t *testing.T, hosts int) *execWorld {
	t.Helper()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), execScale)
	w := &execWorld{t: t, clock: clock, cloud: fake.New(fake.DefaultConfig(), clock)}
	for i := 1; i <= hosts; i++ {
		w.cloud.AddHost(nova.Host{Name: fmt.Sprintf("h%d", i), VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	}
	return w
}

// server adds id on host with 2 VCPU / 2 GiB, using cpu cores.
func (w *execWorld) server(id, host string, cpu float64, group *nova.ServerGroup) {
	w.t.Helper()
	if err := w.cloud.AddServer(nova.Server{ID: id, Name: id, Host: host, VCPUs: 2, RAMMB: 2048, Group: group}); err != nil {
		w.t.Fatal(err)
	}
	if err := w.cloud.SetDemand(id, nova.Demand{CPU: cpu, RAMMB: 1024}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *execWorld) executor(cfg node.ExecConfig, c nova.Client, d nova.DemandSource, clock node.Clock) *node.Executor {
	return node.NewExecutor(cfg, c, d, scheduler.DefaultThresholds(), clock, zerolog.Nop())
}

func fastExec() node.ExecConfig {
	cfg := node.DefaultExecConfig()
	cfg.Poll = 100 * time.Millisecond
	return cfg
}

func move(id, from, to string, cpu float64) scheduler.Action {
	return scheduler.Action{Kind: scheduler.LiveMigrate, Server: id, From: from, To: to, VCPUs: 2, RAMMB: 2048, CPU: cpu, RAM: 1024}
}

// Every reason the executor's re-check skips an action, and the moves it
// must not skip. Each case starts from h1 holding s1 (2 cores) and
// builds what the case needs.
func TestExecutorRecheck(t *testing.T) {
	group := &nova.ServerGroup{ID: "g1", Name: "web", Policy: nova.PolicyAntiAffinity}
	for _, tc := range []struct {
		name  string
		setup func(w *execWorld)
		plan  []scheduler.Action // one step
		cfg   func(*node.ExecConfig)
		local bool // the demand source measures h1 only (cgroup-like)
		want  []string
	}{
		{name: "moves", plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"done[none]"}},
		{name: "server moved meanwhile", plan: []scheduler.Action{move("s1", "h3", "h2", 2)},
			want: []string{"skipped[server_changed]: server is now ACTIVE on \"h1\""}},
		{name: "destination disabled", setup: func(w *execWorld) {
			_ = w.cloud.SetServiceStatus(context.Background(), "h2", true, "maintenance")
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[destination_disabled]: destination is disabled"}},
		{name: "migration from elsewhere on the destination", setup: func(w *execWorld) {
			w.server("x", "h3", 1, nil)
			if _, err := w.cloud.LiveMigrate(context.Background(), "x", "h2"); err != nil {
				w.t.Fatal(err)
			}
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[destination_busy]: destination has 2 VCPU of migrations in progress from elsewhere"}},
		{name: "placement full", setup: func(w *execWorld) {
			for i := range 3 {
				w.server(fmt.Sprintf("f%d", i), "h2", 0.1, nil) // 6 of 8 VCPU allocated, little demand
			}
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2), move("s2", "h1", "h2", 0.5)},
			want: []string{"done[none]", "skipped[placement]: destination placement capacity no longer fits"}},
		{name: "destination would be overloaded", setup: func(w *execWorld) {
			w.server("busy", "h2", 7, nil)
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[overload]: destination would be overloaded"}},
		{name: "destination overloaded as its agent would measure, not as the plan saw it", local: true, setup: func(w *execWorld) {
			w.server("busy", "h2", 7, nil)
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[overload]: destination would be overloaded"}},
		{name: "anti-affinity", setup: func(w *execWorld) {
			w.server("peer", "h2", 0.5, group)
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[server_group]: anti-affinity group web already has peer"}},
		{name: "locked meanwhile", setup: func(w *execWorld) {
			if err := w.cloud.SetLocked("s1", true); err != nil {
				w.t.Fatal(err)
			}
		}, plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[server_changed]: server is locked"}},
		{name: "advise mode", cfg: func(c *node.ExecConfig) { c.DryRun = true },
			plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"skipped[advise]: advise mode"}},
		{name: "unmeasured destination is no reason to skip", local: true,
			plan: []scheduler.Action{move("s1", "h1", "h2", 2)}, want: []string{"done[none]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			g := (*nova.ServerGroup)(nil)
			if strings.Contains(tc.name, "anti-affinity") {
				g = group
			}
			w.server("s1", "h1", 2, g)
			w.server("s2", "h1", 0.5, nil)
			if tc.setup != nil {
				tc.setup(w)
			}
			cfg := fastExec()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			var d nova.DemandSource = w.cloud
			snap := []scheduler.Host{}
			if tc.local {
				d = node.OnlyHost(w.cloud, "h1")
				// The plan saw h2 idle: only a fresh measurement tells.
				snap = []scheduler.Host{{Name: "h2"}}
			}
			e := w.executor(cfg, w.cloud, d, w.clock)
			if tc.local && strings.Contains(tc.name, "overloaded") {
				e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
					return w.cloud.Demand(ctx, host) // the destination's agent answers
				}
			}
			res := e.Execute(context.Background(), scheduler.Event{ID: "ev-" + tc.name}, scheduler.Plan{Steps: [][]scheduler.Action{tc.plan}, Snapshot: snap})
			if len(res.Actions) != len(tc.want) {
				t.Fatalf("%d results, want %d: %+v", len(res.Actions), len(tc.want), res)
			}
			// The actions of one step run in parallel: compare as a set.
			var got []string
			for _, a := range res.Actions {
				g := a.Outcome.String() + "[" + string(a.Class) + "]"
				if a.Reason != "" {
					g += ": " + a.Reason
				}
				got = append(got, g)
			}
			for _, want := range tc.want {
				i := slices.IndexFunc(got, func(g string) bool { return strings.HasPrefix(g, want) })
				if i < 0 {
					t.Errorf("no result %q...; got %q", want, got)
					continue
				}
				got = slices.Delete(got, i, i+1)
			}
			if v := w.cloud.Violations(); len(v) > 0 {
				t.Errorf("violations: %v", v)
			}
		})
	}
}

// A drain's moves leave one source host: the executor hands Nova the next
// one while the previous runs, so Nova (one migration at a time per
// source) never waits for the agent between two of them.
func TestExecutorKeepsTheSourceBusy(t *testing.T) {
	w := newExecWorld(t, 3)
	var plan scheduler.Plan
	for i := range 4 {
		id := fmt.Sprintf("s%d", i)
		w.server(id, "h1", 0.5, nil)
		plan.Steps = append(plan.Steps, []scheduler.Action{move(id, "h1", fmt.Sprintf("h%d", 2+i%2), 0.5)})
	}
	res := w.executor(fastExec(), w.cloud, w.cloud, w.clock).Execute(context.Background(), scheduler.Event{ID: "drain"}, plan)
	if res.Done != 4 {
		t.Fatalf("%+v, want 4 done", res)
	}
	var prevEnd time.Time
	for i := range 4 {
		ms, err := w.cloud.Migrations(context.Background(), fmt.Sprintf("s%d", i))
		if err != nil || len(ms) != 1 {
			t.Fatalf("s%d migrations %v, %v", i, ms, err)
		}
		m := ms[0]
		if i > 0 && !m.CreatedAt.Before(prevEnd) {
			t.Errorf("migration of s%d created at %s, after s%d's ended at %s: the source sat idle", i, m.CreatedAt.Format("05.000"), i-1, prevEnd.Format("05.000"))
		}
		prevEnd = m.UpdatedAt
	}
	if v := w.cloud.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

// skewed is a clock ahead of Nova's.
type skewed struct {
	node.Clock
	by time.Duration
}

func (s skewed) Now() time.Time { return s.Clock.Now().Add(s.by) }

// The agent's clock 5 s ahead of Nova's must not turn a completed
// migration into a timeout: migrations are matched against those known
// before the action, not by time.
func TestExecutorIgnoresClockSkew(t *testing.T) {
	w := newExecWorld(t, 2)
	w.server("s1", "h1", 1, nil)
	cfg := fastExec()
	cfg.MigrationTimeout = 10 * time.Second // wall time: skewed is not a *node.Scaled
	res := w.executor(cfg, w.cloud, w.cloud, skewed{w.clock, 5 * time.Second}).Execute(context.Background(),
		scheduler.Event{ID: "skew"}, scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}}})
	if res.Done != 1 {
		t.Fatalf("%+v, want done", res.Actions)
	}
}

// blind accepts actions but never answers a status read.
type blind struct {
	nova.Client
	reads atomic.Int64
}

func (b *blind) Migrations(context.Context, string) ([]nova.Migration, error) {
	if b.reads.Add(1) == 1 {
		return nil, nil // the re-check's read
	}
	return nil, fmt.Errorf("status: %w", nova.ErrUnavailable)
}

func (b *blind) MigrationsInProgress(context.Context, string) ([]nova.MigrationProgress, error) {
	return nil, fmt.Errorf("progress: %w", nova.ErrUnavailable)
}

// A Nova that stops answering ends the action after Unresponsive, not
// after the whole MigrationTimeout, and says the outcome is unknown.
func TestExecutorGivesUpOnSilentNova(t *testing.T) {
	w := newExecWorld(t, 2)
	w.server("s1", "h1", 1, nil)
	cfg := fastExec()
	cfg.Retries, cfg.Unresponsive, cfg.MigrationTimeout = 0, 5*time.Second, time.Hour
	b := &blind{Client: w.cloud}
	start := w.clock.Now()
	res := w.executor(cfg, b, w.cloud, w.clock).Execute(context.Background(), scheduler.Event{ID: "silent"},
		scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}}})
	if res.Failed != 1 || !strings.Contains(res.Actions[0].Reason, "outcome unknown") || res.Actions[0].Class != node.ReasonTimeout {
		t.Fatalf("%+v, want failed with an unknown outcome", res.Actions)
	}
	if took := w.clock.Now().Sub(start); took > time.Minute {
		t.Errorf("gave up after %s of cloud time, want about Unresponsive (5 s)", took)
	}
}

// ctl is a fixed set of operator controls.
type ctl struct {
	paused   bool
	excluded map[string]bool
	advise   map[string]bool
}

func (c ctl) Paused() bool              { return c.paused }
func (c ctl) Excluded(host string) bool { return c.excluded[host] }
func (c ctl) Advise(host string) bool   { return c.advise[host] }

// The operator's controls hold actions back before any Nova request;
// advise for one end of a move replaces the configured mode.
func TestExecutorControls(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ctl
		want string
	}{
		{"paused", ctl{paused: true}, "skipped[paused]: region paused"},
		{"source excluded", ctl{excluded: map[string]bool{"h1": true}}, "skipped[excluded]: h1 is excluded"},
		{"destination excluded", ctl{excluded: map[string]bool{"h2": true}}, "skipped[excluded]: h2 is excluded"},
		{"destination in advise mode", ctl{advise: map[string]bool{"h2": true}}, "skipped[advise]: advise mode"},
		{"another host excluded", ctl{excluded: map[string]bool{"h3": true}}, "done[none]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			w.server("s1", "h1", 2, nil)
			e := w.executor(fastExec(), w.cloud, w.cloud, w.clock)
			e.Controls = tc.c
			res := e.Execute(context.Background(), scheduler.Event{ID: "ev"}, scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}})
			a := res.Actions[0]
			got := a.Outcome.String() + "[" + string(a.Class) + "]"
			if a.Reason != "" {
				got += ": " + a.Reason
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q...", got, tc.want)
			}
			s, _ := w.cloud.Server(context.Background(), "s1")
			if moved := s.Host == "h2"; moved != (tc.want == "done[none]") {
				t.Errorf("s1 on %s after %q", s.Host, got)
			}
		})
	}
}

// On a queued API (every request answers in 8 s, a destination's read
// takes three in a row) the re-check waits for Nova when the agent has
// measured that latency, and gives up at recheck_timeout when it has not.
func TestExecutorRecheckWaitsForAQueuedAPI(t *testing.T) {
	for _, measured := range []bool{false, true} {
		clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), execScale)
		fc := fake.DefaultConfig()
		fc.APILatency = 8 * time.Second
		w := &execWorld{t: t, clock: clock, cloud: fake.New(fc, clock)}
		for _, h := range []string{"h1", "h2"} {
			w.cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
		}
		w.server("s1", "h1", 2, nil)
		e := w.executor(fastExec(), w.cloud, w.cloud, w.clock) // recheck_timeout 20 s
		if measured {
			e.ObserveLatency(15 * time.Second)
		}
		res := e.Execute(context.Background(), scheduler.Event{ID: "queued"}, scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}})
		got := res.Actions[0]
		if measured && got.Outcome != node.ActionDone {
			t.Errorf("latency measured: %s %s %s, want done", got.Outcome, got.Class, got.Reason)
		}
		if !measured && (got.Outcome != node.ActionSkipped || got.Class != node.ReasonReadFailed) {
			t.Errorf("nothing measured: %s %s %s, want skipped read_failed", got.Outcome, got.Class, got.Reason)
		}
	}
}
