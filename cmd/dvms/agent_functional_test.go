//go:build functional

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// TestFunctionalAgents runs one `dvms agent` process per compute host of
// the functional cloud (a real Nova, devstack/functional) over a real NATS
// server (Debian's nats-server started by up.sh), with 43 servers (8 on
// the host to drain, 5 on each other), and checks through the stock
// openstack CLI and Nova's own logs what an operator would: what idle
// agents cost nova-api and placement, a maintenance drain at Nova's own
// speed, overload, preemption with unshelve, and a compute crash
// mid-drain, and an operator's decisions on advised plans with `dvms
// explain`. Demand comes from the `file` source the test writes.
//
// Two fleets run one after the other: the first with the sample's
// defaults for everything that costs Nova requests (what an operator
// deploys) for the rest, drain and overload phases; the second with
// preemption on and a fast unshelve round for the last two.
func TestFunctionalAgents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	w, bin := newWorld(t, ctx)
	fc, hosts := w.fc, w.hosts
	w.writeDemand(nil)
	const drainHost = "compute-1"
	per := map[string]int{}
	for _, h := range hosts {
		per[h] = 5
	}
	per[drainHost] = 8
	w.bootServers(per)
	w.userNames()

	// The cloud's own rate, no agent running: nova-compute's periodic
	// resource tracker (every 60 s on each host) and nothing else, so one
	// minute holds exactly one period of it.
	baseline, _ := w.measure("baseline, no agent", baselineWindow)

	started := w.logs.mark(t)
	rest := startFleet(t, fc, bin, hosts, "",
		w.fleetEnv("DVMS_NOVA_SERVER_METADATA_CONTROLS=true")...) // the admin-set dvms:maintenance_action of MaintenanceActions
	w.waitMembers(rest)
	t.Run("QuietAtRest", func(t *testing.T) { w.t = t; w.quiet(rest, started, baseline) })
	t.Run("MaintenanceDrainFromOpenstackCLI", func(t *testing.T) { w.t = t; w.drain(rest, drainHost, per[drainHost]) })
	t.Run("OperatorsViewOfTheDrain", func(t *testing.T) { w.t = t; w.operatorsView(rest, bin, drainHost, "maintenance") })
	t.Run("Overload", func(t *testing.T) { w.t = t; w.overload(rest, "compute-2") })
	t.Run("OperatorsViewOfTheOverload", func(t *testing.T) { w.t = t; w.operatorsView(rest, bin, "compute-2", "overload") })
	t.Run("AdviseEnforcePauseResume", func(t *testing.T) { w.t = t; w.operatorControls(rest, bin, "compute-3", "compute-4") })
	t.Run("ApproveRejectExplain", func(t *testing.T) {
		w.t = t
		w.approveAndExplain(rest, bin, [3]string{"compute-5", "compute-7", "compute-8"}, "compute-6")
	})
	t.Run("MaintenanceActions", func(t *testing.T) {
		w.t = t
		// not compute-1 (the preemption phase's), compute-3 or compute-8 (the fault phase's)
		w.maintenanceActions(rest, bin, "compute-6", "compute-7", "compute-5", "compute-4", "compute-2")
	})
	w.t = t
	rest.stop(t)

	fleet := startFleet(t, fc, bin, hosts, "preempt", w.fleetEnv(
		"DVMS_SCHEDULER_PREEMPT=true", "DVMS_SCHEDULER_UNSHELVE_INTERVAL=3",
		"DVMS_SCHEDULER_POLL_INTERVAL=1", "DVMS_SCHEDULER_RETRY_BACKOFF=2", "DVMS_SCHEDULER_MAX_RETRY_BACKOFF=8")...)
	w.waitMembers(fleet)
	t.Run("PreemptionAndUnshelve", func(t *testing.T) { w.t = t; w.preempt(drainHost) })
	t.Run("ComputeKilledMidDrain", func(t *testing.T) { w.t = t; w.fault(fleet, bin, "compute-3", "compute-8") })
	w.t = t
	fleet.stop(t)
}

// newWorld connects to the functional cloud (8 hosts or more), builds
// dvms, and leaves every host enabled and none of the tests' servers
// (dvmsft-*), now and when t ends (a previous run may have been cut short).
func newWorld(t *testing.T, ctx context.Context) (*world, string) {
	t.Helper()
	fc := functionalCloud(t, ctx)
	bin := dvmsBinary(t, ctx)
	hosts := funcHosts(t, ctx, fc)
	if len(hosts) < 8 {
		t.Fatalf("want 8 compute hosts (up.sh 8), have %v", hosts)
	}
	w := &world{t: t, ctx: ctx, fc: fc, hosts: hosts, demand: filepath.Join(t.TempDir(), "demand.json"), logs: newAPILogs(fc.dir)}
	w.enableAll()
	w.deleteServers()
	t.Cleanup(w.deleteServers)
	t.Cleanup(w.enableAll)
	return w, bin
}

// enableAll enables the nova-compute service of every host.
func (w *world) enableAll() {
	for _, h := range w.hosts {
		if err := w.fc.cl.SetServiceStatus(context.Background(), h, false, ""); err != nil {
			w.t.Logf("enable %s: %v", h, err)
		}
	}
}

// waitMembers waits until every agent of f has started and heard every
// other one (a "member up" record for each).
func (w *world) waitMembers(f *fleet) {
	w.t.Helper()
	// Eight agents logging in at once cost keystone, nova-api and placement
	// (one uwsgi or eventlet worker each) a token validation apiece: on a
	// loaded 2-core machine placement answered their first requests in
	// 30 s.
	if !w.eventually("agents started and all members up", 3*time.Minute, func() bool { return f.allMembersUp() }) {
		w.t.Fatal("agents did not all start and hear each other within 3 minutes; see " + f.logDir)
	}
}

type world struct {
	t      *testing.T
	ctx    context.Context
	fc     funcCloud
	hosts  []string
	demand string
	ids    []string // the test's servers
	logs   apiLogs  // nova-api's and placement's request logs
	boot   bootSpec // what bootServers boots; the zero value is the functional tier's
	ops    *opsEnv  // where `dvms status/events` ask; nil: the functional cloud's agents
}

// bootSpec is the flavor, image and name prefix of the test's servers.
type bootSpec struct{ flavor, image, prefix string }

func (b bootSpec) orDefault() bootSpec {
	if b.flavor == "" {
		return bootSpec{flavor: "dvms.tiny", image: "dvms-tiny", prefix: "dvmsft-"}
	}
	return b
}

func funcHosts(t *testing.T, ctx context.Context, fc funcCloud) []string {
	hs, err := fc.cl.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}

func (w *world) eventually(what string, d time.Duration, cond func() bool) bool {
	w.t.Helper()
	return w.eventuallyEvery(what, d, 2*time.Second, cond)
}

// eventuallyEvery checks cond every `every` for at most d.
func (w *world) eventuallyEvery(what string, d, every time.Duration, cond func() bool) bool {
	w.t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			w.t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
			return true
		}
		select {
		case <-w.ctx.Done():
			return false
		case <-time.After(every):
		}
	}
	return cond()
}

func (w *world) osc(args ...string) string {
	w.t.Helper()
	out, err := w.fc.osc(w.t, w.ctx, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// placement maps each host to the test's servers on it (from Nova).
func (w *world) placement() map[string][]nova.Server {
	w.t.Helper()
	out := map[string][]nova.Server{}
	for _, h := range w.hosts {
		ss, err := w.fc.cl.Servers(w.ctx, h)
		if err != nil {
			w.t.Fatalf("servers on %s: %v", h, err)
		}
		for _, s := range ss {
			if slices.Contains(w.ids, s.ID) {
				out[h] = append(out[h], s)
			}
		}
	}
	return out
}

func (w *world) deleteServers() { w.deleteNamed("^" + w.boot.orDefault().prefix) }

// deleteNamed deletes the servers whose name matches nameRE and waits
// until Nova lists none.
func (w *world) deleteNamed(nameRE string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := w.fc.osc(w.t, ctx, "server", "list", "--all-projects", "--name", nameRE, "-f", "value", "-c", "ID")
	if err != nil {
		w.t.Logf("cleanup: %v", err)
		return
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return
	}
	// Without --wait: the CLI waits for each server in turn (43 servers
	// took over 4 minutes), while Nova deletes them all at once.
	start := time.Now()
	if _, err := w.fc.osc(w.t, ctx, append([]string{"server", "delete"}, ids...)...); err != nil {
		w.t.Logf("cleanup: %v", err)
	}
	for {
		out, err := w.fc.osc(w.t, ctx, "server", "list", "--all-projects", "--name", nameRE, "-f", "value", "-c", "ID")
		if err == nil && strings.TrimSpace(out) == "" {
			w.t.Logf("cleanup: %d servers deleted in %s", len(ids), time.Since(start).Round(time.Second))
			return
		}
		select {
		case <-ctx.Done():
			w.t.Logf("cleanup: servers left after 5 min: %s %v", out, err)
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// bootServers boots per[host] servers (w.boot: dvms.tiny by default) on
// every host (pinned with the admin availability-zone syntax) and waits
// until all are ACTIVE.
func (w *world) bootServers(per map[string]int) {
	w.t.Helper()
	spec := w.boot.orDefault()
	start := time.Now()
	want := 0
	// One CLI call per host, side by side: each spends seconds starting
	// and logging in before its one request.
	errs := make(chan error, len(w.hosts))
	for _, h := range w.hosts {
		n := per[h]
		want += n
		go func() {
			if n == 0 {
				errs <- nil
				return
			}
			_, err := w.fc.osc(w.t, w.ctx, "server", "create", "--flavor", spec.flavor, "--image", spec.image, "--nic", "none",
				"--availability-zone", "nova:"+h, "--min", fmt.Sprint(n), "--max", fmt.Sprint(n), spec.prefix+h)
			errs <- err
		}()
	}
	for range w.hosts {
		if err := <-errs; err != nil {
			w.t.Fatal(err)
		}
	}
	ok := w.eventually(fmt.Sprintf("%d servers ACTIVE", want), 5*time.Minute, func() bool {
		out, err := w.fc.osc(w.t, w.ctx, "server", "list", "--all-projects", "--name", "^"+spec.prefix, "-f", "json", "-c", "ID", "-c", "Status")
		if err != nil {
			return false
		}
		var rows []struct{ ID, Status string }
		if json.Unmarshal([]byte(out), &rows) != nil {
			return false
		}
		w.ids = w.ids[:0]
		active := 0
		for _, r := range rows {
			w.ids = append(w.ids, r.ID)
			if r.Status == "ACTIVE" {
				active++
			}
			if r.Status == "ERROR" {
				w.t.Fatalf("server %s went to ERROR while booting", r.ID)
			}
		}
		return active == want && len(rows) == want
	})
	if !ok {
		w.t.Fatalf("%d servers not ACTIVE after 5 min", want)
	}
	pl := w.placement()
	for _, h := range w.hosts {
		if len(pl[h]) != per[h] {
			w.t.Fatalf("%s hosts %d of the test's servers, want %d", h, len(pl[h]), per[h])
		}
	}
	w.t.Logf("booted %d servers in %s", want, time.Since(start).Round(time.Second))
}

// writeDemand writes the file demand source atomically: server id →
// cores (RAM is 256 MB each).
func (w *world) writeDemand(cpu map[string]float64) {
	w.t.Helper()
	doc := map[string]map[string]float64{}
	for id, c := range cpu {
		doc[id] = map[string]float64{"cpu": c, "ram_mb": 256}
	}
	data, _ := json.Marshal(doc)
	tmp := w.demand + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.demand); err != nil {
		w.t.Fatal(err)
	}
}

// ---- maintenance drain ----

type migrationRow struct {
	ID        int    `json:"Id"`
	Server    string `json:"Server UUID"`
	Source    string `json:"Source Compute"`
	Dest      string `json:"Dest Compute"`
	Status    string `json:"Status"`
	Type      string `json:"Type"`
	CreatedAt string `json:"Created At"`
	UpdatedAt string `json:"Updated At"`
}

// migrationsFrom: `openstack server migration list --host host`, which
// lists the migrations into host too.
func (w *world) migrationsFrom(host string) []migrationRow { return w.migrationList("--host", host) }

// migrationList is `openstack server migration list ARGS…`.
func (w *world) migrationList(args ...string) []migrationRow {
	w.t.Helper()
	out := w.osc(append([]string{"server", "migration", "list", "-f", "json"}, args...)...)
	var rows []migrationRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		w.t.Fatalf("migration list: %v\n%s", err, out)
	}
	return rows
}

// drain disables host (want servers on it) as an operator would and
// times the drain against Nova's own records, which it returns.
func (w *world) drain(f *fleet, host string, want int) drainFigures {
	t := w.t
	before := w.placement()[host]
	if len(before) != want {
		t.Fatalf("%s has %d of the test's servers, want %d", host, len(before), want)
	}
	mark := w.logs.mark(t)
	w.osc("compute", "service", "set", "--disable", "--disable-reason", "maintenance", host, "nova-compute")
	after := w.logs.mark(t)
	// The disable time is Nova's: when nova-api received the PUT (its
	// log's clock, local time, milliseconds: the answer's line minus the
	// request's time). Nova commits the status first and answers only once
	// the compute has synced its COMPUTE_STATUS_DISABLED trait, 7 s later
	// on a loaded machine, while the agents already see the host disabled.
	// The CLI's own start-up before it is not the agents' time.
	var disabled time.Time
	for _, q := range w.logs.between(t, mark, after) {
		if q.service == "nova-api" && q.method == "PUT" && strings.Contains(q.path, "/os-services/") && q.status == 200 {
			disabled = q.received()
			t.Logf("disable: nova-api received the PUT at %s and answered %s later", disabled.Format("15:04:05.000"), q.took.Round(time.Millisecond))
		}
	}
	if disabled.IsZero() {
		t.Fatalf("no PUT /os-services/{id} in nova-api's log while the CLI disabled %s", host)
	}
	if disabled.Before(mark.at.Add(-time.Second)) || disabled.After(after.at.Add(time.Second)) {
		t.Fatalf("nova-api logged the disable at %s, outside the CLI's run %s..%s: the log's clock is not this one (time zone?)",
			disabled, mark.at, after.at)
	}
	var empty time.Time
	if !w.eventuallyEvery(host+" empty", 6*time.Minute, time.Second, func() bool {
		ss, err := w.fc.cl.Servers(w.ctx, host)
		empty = time.Now()
		return err == nil && len(ss) == 0
	}) {
		t.Fatalf("%s still has %d servers after 6 min; agent logs in %s", host, len(w.placement()[host]), f.logDir)
	}

	// `openstack server migration list --host`: every server that left
	// went by a completed live migration, none failed; Nova's own
	// created -> updated intervals say how long it spent migrating.
	var ids []string
	for _, s := range before {
		ids = append(ids, s.ID)
	}
	d, err := drainFiguresOf(w.migrationsFrom(host), host, ids, disabled, empty)
	if err != nil {
		t.Fatal(err)
	}
	// The first request the agents sent, from nova-api's log (milliseconds;
	// Nova's created_at has whole seconds, truncated).
	var firstPost time.Time
	for _, q := range w.logs.between(t, mark, w.logs.mark(t)) {
		if q.method == "POST" && strings.HasSuffix(q.path, "/action") &&
			slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(q.path, id) }) {
			firstPost = q.received()
			break
		}
	}
	t.Logf("DRAIN %s: %s; first os-migrateLive POST received +%s after the disable", host, d, firstPost.Sub(disabled).Round(time.Millisecond))
	for _, p := range d.problems() {
		t.Error(p)
	}
	moved := d.moved

	// `openstack server event list`: the live-migration action of each
	// server carries the request id the agent recorded. One CLI call per
	// server, side by side (each spends seconds starting and logging in).
	type event struct {
		RequestID string `json:"Request ID"`
		Action    string `json:"Action"`
	}
	type listed struct {
		id, out string
		err     error
	}
	acts := f.actions()
	lists := make(chan listed, len(moved))
	for id := range moved {
		go func() {
			out, err := w.fc.osc(t, w.ctx, "server", "event", "list", id, "-f", "json")
			lists <- listed{id, out, err}
		}()
	}
	for range moved {
		l := <-lists
		if l.err != nil {
			t.Errorf("event list %s: %v", l.id, l.err)
			continue
		}
		var a *agentAction
		for i := range acts {
			if acts[i].Server == l.id && acts[i].Action == "live-migrate" {
				a = &acts[i]
			}
		}
		if a == nil || a.NovaRequestID == "" || !strings.HasPrefix(a.RequestID, "req-") || a.Event == "" {
			t.Errorf("no agent record of the live migration of %s (with event id, request ids): %+v", l.id, a)
			continue
		}
		var evs []event
		if err := json.Unmarshal([]byte(l.out), &evs); err != nil {
			t.Errorf("event list %s: %v", l.id, err)
			continue
		}
		if !slices.ContainsFunc(evs, func(e event) bool { return e.Action == "live-migration" && e.RequestID == a.NovaRequestID }) {
			t.Errorf("server event list %s has no live-migration with request id %s (agent event %s): %+v", l.id, a.NovaRequestID, a.Event, evs)
		}
	}
	// Disabled hosts are never destinations: compute-1 stays empty while
	// the next phases run (it is the capacity that returns later).
	return d
}

// ---- overload ----

func (w *world) overload(f *fleet, host string) {
	t := w.t
	overloaded := w.overloadOnly(host)
	t.Logf("overloaded at start: %v", overloaded())
	if !w.eventually("no host overloaded", 4*time.Minute, func() bool { return len(overloaded()) == 0 }) {
		t.Fatalf("still overloaded after 4 min: %v; agent logs in %s", overloaded(), f.logDir)
	}
	n := 0
	for _, a := range f.actions() {
		if a.From == host && a.Action == "live-migrate" {
			n++
		}
	}
	if n == 0 {
		t.Error("overload solved without any live migration from " + host)
	}
}

// overloadOnly writes a demand of 10 cores on each of hosts (8 cores)
// and of 0.5 on every other server of the test, and returns a check of
// the hosts that demand overloads where Nova has the servers when it runs
// ("HOST=cores").
func (w *world) overloadOnly(hosts ...string) func() []string {
	w.t.Helper()
	pl := w.placement()
	for _, host := range hosts {
		if len(pl[host]) == 0 {
			w.t.Fatalf("%s hosts none of the test's servers: nothing to overload it with", host)
		}
	}
	cpu := map[string]float64{}
	for h, ss := range pl {
		for _, s := range ss {
			cpu[s.ID] = 0.5
			if slices.Contains(hosts, h) {
				cpu[s.ID] = 10.0 / float64(len(ss)) // 10 cores of demand on 8
			}
		}
	}
	w.writeDemand(cpu)
	return func() []string {
		var over []string
		for h, ss := range w.placement() {
			sum := 0.0
			for _, s := range ss {
				sum += cpu[s.ID]
			}
			if sum > 8+1e-9 {
				over = append(over, fmt.Sprintf("%s=%.1f", h, sum))
			}
		}
		slices.Sort(over)
		return over
	}
}

// ---- preemption ----

// preempt loads every enabled host to 7.6 of 8 cores and one to 9, so that
// no migration can help (every server is bigger than any host's slack):
// the lowest-priority server is shelved (offloaded). Ending the
// maintenance of capacity (an empty host) lets an agent unshelve it.
func (w *world) preempt(capacity string) {
	t := w.t
	pl := w.placement()
	target := ""
	for h, ss := range pl {
		if h != capacity && (target == "" || len(ss) > len(pl[target]) || (len(ss) == len(pl[target]) && h < target)) {
			target = h
		}
	}
	cpu := map[string]float64{}
	for h, ss := range pl {
		total := 7.6
		if h == target {
			total = 9
		}
		for _, s := range ss {
			cpu[s.ID] = total / float64(len(ss))
		}
	}
	// Preemption is what dvms does when nothing else works: a host an
	// earlier phase left empty and enabled (a drain's host, re-enabled)
	// would take the target's overload by a live migration. Such hosts
	// are disabled for the phase, with a reason that asks for no drain.
	for _, h := range w.hosts {
		if h == capacity || len(pl[h]) > 0 {
			continue
		}
		w.osc("compute", "service", "set", "--disable", "--disable-reason", "dvmsft: empty, out of the preemption phase", h, "nova-compute")
		defer w.osc("compute", "service", "set", "--enable", h, "nova-compute")
		t.Logf("%s holds none of the tests' servers: disabled for the preemption phase", h)
	}
	victim := pl[target][0].ID
	w.osc("server", "set", "--property", "dvms:priority=-1", victim)
	w.writeDemand(cpu)
	status := func(id string) (string, string) {
		s, err := w.fc.cl.Server(w.ctx, id)
		if err != nil {
			t.Fatalf("server %s: %v", id, err)
		}
		return s.Status, s.Host
	}
	if !w.eventually("lowest-priority server shelved", 4*time.Minute, func() bool {
		st, _ := status(victim)
		return st == nova.StatusShelvedOffloaded
	}) {
		st, h := status(victim)
		t.Fatalf("victim %s on %s is %s, not SHELVED_OFFLOADED, after 4 min", victim, h, st)
	}
	for _, id := range w.ids {
		if st, _ := status(id); id != victim && (st == nova.StatusShelvedOffloaded || st == nova.StatusShelved) {
			t.Errorf("server %s (priority 0) was shelved too", id)
		}
	}
	t.Logf("PREEMPTION: %s (dvms:priority=-1) shelved-offloaded from %s", victim, target)

	w.osc("compute", "service", "set", "--enable", capacity, "nova-compute")
	if !w.eventually("shelved server unshelved", 4*time.Minute, func() bool {
		st, _ := status(victim)
		return st == nova.StatusActive
	}) {
		st, h := status(victim)
		t.Fatalf("victim %s is %s on %q, not ACTIVE, 4 min after capacity returned", victim, st, h)
	}
	_, h := status(victim)
	t.Logf("UNSHELVE: %s unshelved onto %s once %s was enabled", victim, h, capacity)
	out := w.osc("server", "event", "list", victim, "-f", "value", "-c", "Action")
	if !strings.Contains(out, "shelveOffload") && !strings.Contains(out, "shelve") || !strings.Contains(out, "unshelve") {
		t.Errorf("event list of %s lacks shelve/unshelve:\n%s", victim, out)
	}
	w.writeDemand(nil) // quiet again
}

// ---- Nova fault ----

// fault drains host and kills the nova-compute of dead (marked down)
// while the drain runs: the drain must finish on the other hosts, no
// server lost, and the fault reported by the agents.
func (w *world) fault(f *fleet, bin, host, dead string) {
	t := w.t
	w.writeDemand(nil) // room everywhere but on the dead host
	onHost := w.placement()[host]
	before := len(onHost)
	if before == 0 {
		t.Fatalf("%s has no servers to drain", host)
	}
	harness := filepath.Join("..", "..", "devstack", "functional", "compute.sh")
	restart := func() {
		cmd := exec.Command("bash", harness, "start", dead)
		cmd.Env = w.fc.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("restart %s: %v\n%s", dead, err, out)
		}
	}
	cmd := exec.CommandContext(w.ctx, bin, "drain", host, "--reason", "dvms:maintenance fault test")
	cmd.Env = w.fc.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dvms drain %s: %v\n%s", host, err, out)
	}
	// Mid-drain: as soon as the first live migration of one of host's
	// servers was accepted (earlier actions from host, such as the
	// preemption's shelve, do not count).
	if !w.eventually("first migration off "+host, 2*time.Minute, func() bool {
		return slices.ContainsFunc(f.actions(), func(a agentAction) bool {
			return a.From == host && a.Action == "live-migrate" &&
				slices.ContainsFunc(onHost, func(s nova.Server) bool { return s.ID == a.Server })
		})
	}) {
		t.Fatalf("no migration off %s started", host)
	}
	cmd = exec.Command("bash", harness, "kill", "--mark-down", dead)
	cmd.Env = w.fc.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kill %s: %v\n%s", dead, err, out)
	}
	t.Logf("killed nova-compute of %s (forced down) mid-drain of %s", dead, host)
	defer restart()
	if !w.eventually(host+" empty despite the crash", 6*time.Minute, func() bool { return len(w.placement()[host]) == 0 }) {
		t.Fatalf("%s still has %d servers; agent logs in %s", host, len(w.placement()[host]), f.logDir)
	}
	// No server lost: every test server is still known to Nova and
	// hosted (or the one left offloaded by the preemption test, none).
	out := w.osc("server", "list", "--all-projects", "--name", "^dvmsft-", "-f", "json", "-c", "ID", "-c", "Status")
	var rows []struct{ ID, Status string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(w.ids) {
		t.Errorf("%d servers listed, want %d", len(rows), len(w.ids))
	}
	for _, r := range rows {
		if r.Status == "ERROR" {
			t.Errorf("server %s in ERROR after the fault", r.ID)
		}
	}
	// Reported: what the agents did around the dead host is in their logs.
	failed, toDead := 0, 0
	for _, a := range f.records() {
		if a.Message == "action failed" || a.Message == "action refused by nova" {
			failed++
		}
		if a.Message == "action accepted by nova" && a.Dest == dead {
			toDead++
		}
	}
	t.Logf("FAULT: %s drained (%d servers) with %s killed; %d actions failed or refused (recorded with their event), %d sent to %s",
		host, before, dead, failed, toDead, dead)
	_ = w.fc.cl.SetServiceStatus(w.ctx, host, false, "")
}

// ---- the agents ----

type fleet struct {
	logDir  string
	procs   map[string]*exec.Cmd
	waits   map[string]chan error
	logs    map[string]string
	done    bool
	refresh func() // brings the files in logs up to date before they are read; nil: the agents write them
}

// fleetEnv is the environment the functional tier's fleets run with, then
// extra (which wins): demand from the test's file, Raft on a free port
// with a fast failure detector, JSON logs the tests read.
func (w *world) fleetEnv(extra ...string) []string {
	return append([]string{"DVMS_MONITOR_SOURCE=file", "DVMS_MONITOR_FILE_PATH=" + w.demand,
		"DVMS_CONSENSUS_BIND=127.0.0.1:0", "DVMS_CONSENSUS_HEARTBEAT_INTERVAL=0.5", "DVMS_CONSENSUS_DEAD_AFTER=3",
		"DVMS_LOG_FORMAT=json", "DVMS_LOG_LEVEL=info"}, extra...)
}

// newFleet is an empty fleet logging under logDir.
func newFleet(logDir string) *fleet {
	return &fleet{logDir: logDir, procs: map[string]*exec.Cmd{}, waits: map[string]chan error{}, logs: map[string]string{}}
}

// startFleet starts one agent per host with the environment env (on top
// of the cloud's etc/dvms.conf); each logs to
// $DVMS_FUNC_DIR/logs/dvms-agent-HOST[-name].log.
func startFleet(t *testing.T, fc funcCloud, bin string, hosts []string, name string, env ...string) *fleet {
	t.Helper()
	return startFleetEach(t, fc, bin, hosts, name, nil, env...)
}

// startFleetEach is startFleet with perHost(host) added to each host's
// environment (nil: nothing).
func startFleetEach(t *testing.T, fc funcCloud, bin string, hosts []string, name string, perHost func(string) []string, env ...string) *fleet {
	t.Helper()
	f := newFleet(filepath.Join(fc.dir, "logs"))
	if err := os.MkdirAll(f.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	suffix := ""
	if name != "" {
		suffix = "-" + name
	}
	for _, h := range hosts {
		logPath := filepath.Join(f.logDir, "dvms-agent-"+h+suffix+".log")
		lf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "agent", "--host", h, "--config", filepath.Join(fc.dir, "etc", "dvms.conf"))
		// Eight agents on one machine: each serves /metrics on a port of
		// its own (logged; fleet.metricsAddr), not all on 9464.
		hostEnv := slices.Concat([]string{"DVMS_METRICS_LISTEN=127.0.0.1:0"}, env)
		if perHost != nil {
			hostEnv = append(hostEnv, perHost(h)...)
		}
		cmd.Env = fc.env(hostEnv...)
		f.launch(t, h, cmd, lf, logPath)
	}
	t.Cleanup(func() { f.stop(t) })
	return f
}

// launch starts host h's agent cmd, its output to lf (closed here), and
// adds it to the fleet.
func (f *fleet) launch(t *testing.T, h string, cmd *exec.Cmd, lf *os.File, logPath string) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent %s: %v", h, err)
	}
	lf.Close()
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	f.procs[h], f.waits[h], f.logs[h] = cmd, ch, logPath
}

// stop sends SIGTERM to every agent: each must exit 0 (graceful) within
// a minute.
func (f *fleet) stop(t *testing.T) {
	if f.done {
		return
	}
	f.done = true
	for _, c := range f.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for h, ch := range f.waits {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("agent %s exited with %v after SIGTERM (log %s)", h, err, f.logs[h])
			}
		case <-time.After(time.Minute):
			_ = f.procs[h].Process.Kill()
			t.Errorf("agent %s did not stop within a minute of SIGTERM (log %s)", h, f.logs[h])
		}
	}
}

// logLine is one agent log record (zerolog JSON).
type logLine struct {
	Level         string `json:"level"`
	Message       string `json:"message"`
	Event         string `json:"event"`
	Server        string `json:"server"`
	From          string `json:"from"`
	Action        string `json:"action"`
	Dest          string `json:"dest"`
	RequestID     string `json:"request_id"`
	NovaRequestID string `json:"nova_request_id"`
	Member        string `json:"member"`
	Class         string `json:"class"`  // of a skipped or ended action
	Reason        string `json:"reason"` // of a skipped action
	Error         string `json:"error"`
}

type agentAction = logLine

func (f *fleet) records() []logLine {
	if f.refresh != nil {
		f.refresh()
	}
	var out []logLine
	for _, p := range f.logs {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				out = append(out, l)
			}
		}
		fh.Close()
	}
	return out
}

// actions are the actions the agents sent to Nova, with their ids.
func (f *fleet) actions() []agentAction {
	var out []agentAction
	for _, l := range f.records() {
		if l.Message == "action accepted by nova" {
			out = append(out, l)
		}
	}
	return out
}

// allMembersUp: every agent logged "agent started" and a "member up"
// for every other agent of the fleet.
func (f *fleet) allMembersUp() bool {
	for h, p := range f.logs {
		fh, err := os.Open(p)
		if err != nil {
			return false
		}
		started, up := false, map[string]bool{}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l.Message {
			case "agent started":
				started = true
			case "member up":
				if _, ours := f.logs[l.Member]; ours && l.Member != h {
					up[l.Member] = true
				}
			}
		}
		fh.Close()
		if !started || len(up) != len(f.logs)-1 {
			return false
		}
	}
	return true
}
