package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/migest"
	"github.com/dvms-project/dvms/scheduler/node"
)

// completionWorld is execWorld's h1..h3 with s1 (2 GiB) on h1, the
// h1 -> h2 pair copying at bw MB/s and s1 dirtying dirty MB/s.
func completionWorld(t *testing.T, bw, dirty float64) *execWorld {
	t.Helper()
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 1, nil)
	if err := w.cloud.SetBandwidth("h1", "h2", bw); err != nil {
		t.Fatal(err)
	}
	if err := w.cloud.SetDirtyRate("s1", dirty); err != nil {
		t.Fatal(err)
	}
	return w
}

// completions records what the policy sent.
type completions struct {
	mu  sync.Mutex
	got []string
}

func (c *completions) note(what, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, what+":"+result)
}

func (c *completions) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.got, ",")
}

func completionExec(action string) node.ExecConfig {
	cfg := fastExec()
	cfg.Completion = node.CompletionConfig{Action: action, StallWindow: 20 * time.Second, TimeoutPerGiB: 100 * time.Second, AbortAfter: 30 * time.Second}
	return cfg
}

func runMove(t *testing.T, w *execWorld, e *node.Executor) node.ActionResult {
	t.Helper()
	res := e.Execute(context.Background(), scheduler.Event{ID: "ev-" + t.Name()},
		scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}}})
	if len(res.Actions) != 1 {
		t.Fatalf("%+v", res)
	}
	if v := w.cloud.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
	return res.Actions[0]
}

func where(t *testing.T, w *execWorld, id string) nova.Server {
	t.Helper()
	s, err := w.cloud.Server(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A migration that does not converge (s1 dirties 50 MB/s, the pair
// copies 20) is forced at the stall window; forcing copies the rest at
// 20 MB/s (about 100 s), so it still runs at migration_abort_after and
// is aborted: the action fails as migration_aborted, the server is
// ACTIVE on its source and the reason says so.
func TestCompletionForcesThenAborts(t *testing.T) {
	w := completionWorld(t, 20, 50)
	var sent completions
	e := w.executor(completionExec(node.CompleteForceThenAbort), w.cloud, w.cloud, w.clock)
	e.OnCompletion = sent.note
	start := w.clock.Now()
	r := runMove(t, w, e)
	took := w.clock.Now().Sub(start)
	if r.Outcome != node.ActionFailed || r.Class != node.ReasonMigrationAborted {
		t.Fatalf("%s[%s]: %s, want failed[migration_aborted]", r.Outcome, r.Class, r.Reason)
	}
	for _, want := range []string{"abort by dvms (not converging", "after force_complete", "ended cancelled", "server ACTIVE on h1 (its source)"} {
		if !strings.Contains(r.Reason, want) {
			t.Errorf("reason %q lacks %q", r.Reason, want)
		}
	}
	if got := sent.String(); got != "force_complete:accepted,abort:accepted" {
		t.Errorf("sent %s, want force_complete then abort, each accepted", got)
	}
	if s := where(t, w, "s1"); s.Host != "h1" || s.Status != nova.StatusActive || s.TaskState != "" {
		t.Errorf("after the abort: %+v, want ACTIVE on h1", s)
	}
	// The first memory figures (the fake's running phase starts at 20 %
	// of 1 s + 2048 MB / 20 MB/s: 20.7 s), the stall window (20 s),
	// abort after (30 s), and the abort itself, with a few polls of slack.
	if took < 70*time.Second || took > 80*time.Second {
		t.Errorf("took %s, want about 20.7 s + 20 s + 30 s", took)
	}
	if st := w.cloud.Stats(); st.Forced != 1 || st.Cancelled != 1 {
		t.Errorf("cloud stats %+v, want 1 forced, 1 cancelled", st)
	}
}

// force_complete alone: the forced migration completes (s1 dirties
// 200 MB/s, the pair copies 100: forcing copies the last 2 GiB in about
// 20 s); the action is done as force_completed, and the estimator
// learnt the pair's bandwidth and that s1 does not converge on it.
func TestCompletionForceCompletes(t *testing.T) {
	w := completionWorld(t, 100, 200)
	var sent completions
	e := w.executor(completionExec(node.CompleteForce), w.cloud, w.cloud, w.clock)
	e.OnCompletion = sent.note
	e.Estimator = migest.New(migest.DefaultConfig())
	r := runMove(t, w, e)
	if r.Outcome != node.ActionDone || r.Class != node.ReasonForceCompleted || !strings.Contains(r.Reason, "force_complete by dvms: not converging") {
		t.Fatalf("%s[%s]: %s, want done[force_completed]", r.Outcome, r.Class, r.Reason)
	}
	if got := sent.String(); got != "force_complete:accepted" {
		t.Errorf("sent %s, want one force_complete", got)
	}
	if s := where(t, w, "s1"); s.Host != "h2" || s.Status != nova.StatusActive {
		t.Errorf("after the forced move: %+v, want ACTIVE on h2", s)
	}
	est := e.Estimator.Snapshot().Estimate(move("s1", "h1", "h2", 1))
	// The figures cannot show a dirty rate above the copy rate (a page
	// dirtied twice is still one page to send): as fast as it copies.
	if est.Source != "pair" || est.BandwidthMBps < 90 || est.BandwidthMBps > 110 || est.DirtyMBps < 0.9*est.BandwidthMBps || est.Converges {
		t.Errorf("learnt %+v, want the pair's ~100 MB/s and s1 dirtying as fast: not converging", est)
	}
}

// A migration that converges (s1 dirties 50 MB/s, the pair copies 100:
// about 42 s for 2 GiB) is left alone, even with a stall window shorter
// than the migration.
func TestCompletionLeavesAConvergingMigrationAlone(t *testing.T) {
	w := completionWorld(t, 100, 50)
	var sent completions
	cfg := completionExec(node.CompleteForceThenAbort)
	cfg.Completion.StallWindow = 5 * time.Second
	e := w.executor(cfg, w.cloud, w.cloud, w.clock)
	e.OnCompletion = sent.note
	r := runMove(t, w, e)
	if r.Outcome != node.ActionDone || r.Class != node.ReasonNone {
		t.Fatalf("%s[%s]: %s, want done[none]", r.Outcome, r.Class, r.Reason)
	}
	if got := sent.String(); got != "" {
		t.Errorf("sent %s to a converging migration", got)
	}
}

// A migration running past migration_completion_timeout per GiB is
// aborted even when Nova reports no memory figures (the fake virt
// driver): here the figures are hidden from the executor.
func TestCompletionLimitScaledByRAM(t *testing.T) {
	w := completionWorld(t, 20, 50)
	cfg := completionExec(node.CompleteAbort)
	cfg.Completion.StallWindow = time.Hour // only the limit can tell
	cfg.Completion.TimeoutPerGiB = 15 * time.Second
	var sent completions
	e := w.executor(cfg, noFigures{w.cloud}, w.cloud, w.clock)
	e.OnCompletion = sent.note
	start := w.clock.Now()
	r := runMove(t, w, e)
	if r.Outcome != node.ActionFailed || r.Class != node.ReasonMigrationAborted || !strings.Contains(r.Reason, "past the limit of 30s for 2048 MB") {
		t.Fatalf("%s[%s]: %s, want failed[migration_aborted] past the 30 s limit", r.Outcome, r.Class, r.Reason)
	}
	if took := w.clock.Now().Sub(start); took < 30*time.Second || took > 40*time.Second {
		t.Errorf("took %s, want about 2 GiB x 15 s", took)
	}
	if got := sent.String(); got != "abort:accepted" {
		t.Errorf("sent %s, want one abort", got)
	}
}

// noFigures hides the memory figures (a driver that reports none).
type noFigures struct{ nova.Client }

func (n noFigures) MigrationsInProgress(ctx context.Context, id string) ([]nova.MigrationProgress, error) {
	ps, err := n.Client.MigrationsInProgress(ctx, id)
	for i := range ps {
		ps[i].MemoryTotal, ps[i].MemoryProcessed, ps[i].MemoryRemaining = 0, 0, 0
	}
	return ps, err
}

// lateForce: Nova completes the migration as the force_complete arrives
// and answers 409 (the server is no longer migrating).
type lateForce struct {
	nova.Client
	once sync.Once
}

func (l *lateForce) ForceCompleteMigration(ctx context.Context, id, mid string) error {
	err := fmt.Errorf("force_complete %s: ended: %w", mid, nova.ErrConflict)
	l.once.Do(func() {
		if ferr := l.Client.ForceCompleteMigration(ctx, id, mid); ferr != nil {
			err = ferr
		}
	})
	return err
}

// A 409 on force_complete is a migration that ended meanwhile: counted
// as such, not retried as a failure, and the action ends as the
// migration did (done, not claimed as forced by dvms).
func TestCompletionConflictIsAMigrationThatEnded(t *testing.T) {
	w := completionWorld(t, 100, 200)
	var sent completions
	e := w.executor(completionExec(node.CompleteForce), &lateForce{Client: w.cloud}, w.cloud, w.clock)
	e.OnCompletion = sent.note
	r := runMove(t, w, e)
	if r.Outcome != node.ActionDone || r.Class != node.ReasonNone {
		t.Fatalf("%s[%s]: %s, want done[none]", r.Outcome, r.Class, r.Reason)
	}
	if got := sent.String(); !strings.HasPrefix(got, "force_complete:ended") || strings.Contains(got, "failed") {
		t.Errorf("sent %s, want force_complete answered 409 (ended)", got)
	}
	if s := where(t, w, "s1"); s.Host != "h2" {
		t.Errorf("server on %s, want h2", s.Host)
	}
}

// The policy is valid only with a known action and positive limits.
func TestCompletionConfigValidate(t *testing.T) {
	if err := node.DefaultCompletionConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := node.CompletionConfig{Action: "pause", StallWindow: 0, TimeoutPerGiB: time.Second, AbortAfter: time.Second}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "migration_completion_action") || !strings.Contains(err.Error(), "migration_stall_window") {
		t.Errorf("Validate = %v, want both problems", err)
	}
	if !errors.Is(nil, nil) {
		t.Fatal()
	}
}

// forbidden refuses the in-progress listing (a policy without
// os_compute_api:servers:migrations:index).
type forbidden struct{ nova.Client }

func (forbidden) MigrationsInProgress(context.Context, string) ([]nova.MigrationProgress, error) {
	return nil, fmt.Errorf("migrations in progress: HTTP 403: %w", nova.ErrBadRequest)
}

// Without the in-progress listing a migration is still followed to its
// end (from os-migrations), without progress and without a policy act.
func TestCompletionWithoutTheListingStillFollows(t *testing.T) {
	w := completionWorld(t, 100, 0)
	var sent completions
	e := w.executor(completionExec(node.CompleteAbort), forbidden{w.cloud}, w.cloud, w.clock)
	e.OnCompletion = sent.note
	if r := runMove(t, w, e); r.Outcome != node.ActionDone || r.Class != node.ReasonNone {
		t.Fatalf("%s[%s]: %s, want done[none]", r.Outcome, r.Class, r.Reason)
	}
	if got := sent.String(); got != "" {
		t.Errorf("sent %s", got)
	}
}

// Following a migration costs Nova one request per poll_interval (the
// in-progress listing, which carries its progress), plus os-migrations
// reads only while the listing does not show it: before Nova lists it
// and once it ended. Measured on the fake's meter, caller "agent".
func TestCompletionFollowCostsOneRequestPerPoll(t *testing.T) {
	w := completionWorld(t, 100, 0) // 1 s + 2048 MB / 100 MB/s: 21.5 s
	cfg := completionExec(node.CompleteAbort)
	cfg.Poll = time.Second
	c := w.cloud.Client("agent")
	start := w.clock.Now()
	if r := runMove(t, w, w.executor(cfg, c, w.cloud, w.clock)); r.Outcome != node.ActionDone {
		t.Fatalf("%+v", r)
	}
	polls := int64(w.clock.Now().Sub(start) / cfg.Poll)
	counts := map[string]int64{}
	for _, ts := range w.cloud.Meter().Snapshot().Templates {
		counts[ts.Template.Method+" "+ts.Template.Path] += ts.Count
	}
	inProgress, osMigrations := counts["GET /servers/{id}/migrations"], counts["GET /os-migrations?instance_uuid"]
	t.Logf("%d polls over %s: %d in-progress listings, %d os-migrations reads (1 by the re-check), all requests %v",
		polls, w.clock.Now().Sub(start).Round(time.Second), inProgress, osMigrations, counts)
	// At most one listing per poll interval (fewer on a busy machine:
	// the scaled clock runs on while the executor's goroutine waits).
	if inProgress < 1 || inProgress > polls+1 {
		t.Errorf("%d in-progress listings for %d poll intervals, want at most one per interval", inProgress, polls)
	}
	if osMigrations > 3 {
		t.Errorf("%d os-migrations reads, want the re-check's, one before the listing shows it and one at the end", osMigrations)
	}
}

// The loop: the solver picks the cheaper move (s1, 2 GiB), whose guest
// dirties memory faster than the pairs copy it; the policy aborts it and
// the estimator learns why; solving again, the solver moves s2 (4 GiB,
// converging) instead, and the overload is relieved.
func TestCompletionAbortTeachesTheSolver(t *testing.T) {
	w := newExecWorld(t, 3)
	for _, s := range []struct {
		id    string
		ramMB int
		cpu   float64
	}{{"s1", 2048, 3}, {"s2", 4096, 3}, {"f", 8192, 3}} {
		if err := w.cloud.AddServer(nova.Server{ID: s.id, Name: s.id, Host: "h1", VCPUs: 2, RAMMB: s.ramMB}); err != nil {
			t.Fatal(err)
		}
		if err := w.cloud.SetDemand(s.id, nova.Demand{CPU: s.cpu, RAMMB: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []string{"h2", "h3"} {
		if err := w.cloud.SetBandwidth("h1", to, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.cloud.SetDirtyRate("s1", 200); err != nil {
		t.Fatal(err)
	}
	e := w.executor(completionExec(node.CompleteAbort), w.cloud, w.cloud, w.clock)
	e.Estimator = migest.New(migest.DefaultConfig())
	problem := func() scheduler.Problem {
		var hosts []scheduler.Host
		for _, hs := range w.cloud.Snapshot() {
			h := scheduler.Host{Name: hs.Host.Name, CPUs: float64(hs.Host.VCPUs), RAMMB: float64(hs.Host.RAMMB),
				AllocVCPUs: hs.Host.AllocatableVCPUs(), AllocRAMMB: hs.Host.AllocatableRAMMB(),
				UsedVCPUs: float64(hs.Host.VCPUsUsed), UsedRAMMB: float64(hs.Host.RAMMBUsed)}
			d, _ := w.cloud.Demand(context.Background(), h.Name)
			for _, s := range w.cloud.ServersOn(h.Name) {
				h.Servers = append(h.Servers, scheduler.Server{ID: s.ID, VCPUs: s.VCPUs, RAMMB: s.RAMMB, CPU: d[s.ID].CPU, RAM: d[s.ID].RAMMB})
			}
			hosts = append(hosts, h)
		}
		return scheduler.Problem{Events: []scheduler.Event{{ID: "ev", Kind: scheduler.Overload, Host: "h1"}}, Hosts: hosts, Thresholds: scheduler.DefaultThresholds()}
	}
	solveAndRun := func(round int) (scheduler.Solution, node.ExecResult) {
		opt := scheduler.DefaultSolveOptions()
		opt.Migrations = e.Estimator.Snapshot()
		sol, plan, err := scheduler.SolveAndPlan(problem(), scheduler.DefaultLimits(), opt)
		if !sol.OK || err != nil {
			t.Fatalf("round %d: %+v, %v", round, sol, err)
		}
		return sol, e.Execute(context.Background(), scheduler.Event{ID: fmt.Sprint("ev-", round), Kind: scheduler.Overload, Host: "h1"}, plan)
	}
	sol, res := solveAndRun(1)
	if len(sol.Moves) != 1 || sol.Moves[0].Server != "s1" || res.Failed != 1 || res.Actions[0].Class != node.ReasonMigrationAborted {
		t.Fatalf("round 1: moves %v, %+v; want s1 moved and aborted", sol.Moves, res.Actions)
	}
	sol, res = solveAndRun(2)
	if len(sol.Moves) != 1 || sol.Moves[0].Server != "s2" || sol.Unconverging != 0 || res.Done != 1 {
		t.Fatalf("round 2: moves %v (%d not converging), %+v; want s2 moved", sol.Moves, sol.Unconverging, res.Actions)
	}
	if w.cloud.Overloaded("h1") {
		t.Error("h1 still overloaded")
	}
}
