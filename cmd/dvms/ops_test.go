package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/internal/promcheck"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/node"
)

// opsRegion is the region of the agents the operator tests start.
const opsRegion = "ops"

// opsCloud is a simulated cloud of n hosts of 8 cores whose first host
// carries 10 cores of demand.
func opsCloud(t *testing.T, n int) *fake.Cloud {
	t.Helper()
	c := fake.New(fake.DefaultConfig(), node.Wall{})
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("compute-%d", i)
		c.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 32768, CPUAllocRatio: 4, RAMAllocRatio: 1})
		load := 1
		if i == 1 {
			load = 5
		}
		for j := 0; j < load; j++ {
			id := fmt.Sprintf("s-%d-%d", i, j)
			if err := c.AddServer(nova.Server{ID: id, Name: id, Host: h, VCPUs: 2, RAMMB: 1024}); err != nil {
				t.Fatal(err)
			}
			if err := c.SetDemand(id, nova.Demand{CPU: 2, RAMMB: 512}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// startOpsAgent starts the `dvms agent` of host (its wiring, as
// runAgent does) on cloud, over the NATS server at url, with /metrics on
// a free port.
// natsViolations counts the NATS permission violations the agents of
// these tests logged (their connections report them asynchronously).
var natsViolations atomic.Int64

type violationSink struct{}

func (violationSink) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("Permissions Violation")) {
		natsViolations.Add(1)
	}
	return len(p), nil
}

func startOpsAgent(t *testing.T, ctx context.Context, cloud *fake.Cloud, url, host string, opts ...func(*daemon.Config)) *daemon.Proc {
	t.Helper()
	cfg, err := daemon.Load(daemon.Source{Env: fakeEnv("OS_CLOUD=fake")}, host)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.Region, cfg.NATSURL, cfg.Arbiter, cfg.MetricsListen = opsRegion, url, "local", "127.0.0.1:0"
	cfg.Runtime.Exec.Poll = 200 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	p, err := daemon.Start(ctx, cfg, false, &daemon.NovaDeps{Client: cloud, Meter: cloud.Meter(), Demand: cloud}, zerolog.New(violationSink{}).Level(zerolog.WarnLevel), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.MetricsAddr() == "" {
		t.Fatal("no metrics server")
	}
	return p
}

// signedRegion makes the keys of a region whose agents sign (one pair per
// host in keys, and the operator alice's in keys/operators) and starts
// NATS as `dvms nats-config` writes it: the agents with their own keys
// and permissions, the operator's tools with an observer key (the key
// that signs a command is another matter: the agents check that one).
// The server is shut down when the test ends.
func signedRegion(t *testing.T, hosts ...string) (keys, observerKey string, ns *bus.Embedded) {
	t.Helper()
	keys = t.TempDir()
	for _, h := range hosts {
		if _, err := auth.GenerateKey(keys, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := auth.GenerateKey(filepath.Join(keys, control.OperatorsDir), "alice"); err != nil {
		t.Fatal(err)
	}
	obs := t.TempDir()
	if _, err := auth.GenerateKey(obs, "ops"); err != nil {
		t.Fatal(err)
	}
	sc, err := auth.NATSServerConfig(keys, opsRegion, map[string][]string{"observer": {filepath.Join(obs, "ops.pub")}})
	if err != nil {
		t.Fatal(err)
	}
	ns, err = bus.StartEmbedded(bus.EmbeddedConfig{Port: -1, Users: sc.Users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return keys, filepath.Join(obs, "ops.key"), ns
}

// scrape returns the samples of /metrics: series (name{labels}) -> value.
func scrape(t *testing.T, p *daemon.Proc) map[string]float64 {
	t.Helper()
	return scrapeAt(t, p.MetricsAddr())
}

// scrapeAt returns the samples of the /metrics served at addr.
func scrapeAt(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	promcheck.Promtool(t, body) // when installed (required with DVMS_REQUIRE_PROMTOOL=1)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds the samples of metric name whose labels include every
// label="value" of want.
func sum(samples map[string]float64, name string, want ...string) float64 {
	var s float64
	for series, v := range samples {
		n, labels, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
			}
		}
		if ok {
			s += v
		}
	}
	return s
}

func hasSeries(samples map[string]float64, name string) bool {
	for series := range samples {
		if n, _, _ := strings.Cut(series, "{"); n == name {
			return true
		}
	}
	return false
}

func healthz(t *testing.T, p *daemon.Proc) int {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two agents on a simulated cloud over a real NATS server solve
// compute-1's overload; what the operator sees — /metrics, /healthz,
// `dvms status -f json`, `dvms events -f json` — matches what the cloud
// shows.
func TestOperatorsViewOfAnOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two agents for several seconds")
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	cloud := opsCloud(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a1 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-1")
	a2 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-2")
	defer func() {
		cancel()
		for _, a := range []*daemon.Proc{a1, a2} {
			if err := a.WaitClosed(); err != nil {
				t.Error(err)
			}
		}
	}()

	waitUntil(t, 10*time.Second, "/healthz 200", func() bool { return healthz(t, a1) == 200 && healthz(t, a2) == 200 })
	// dvms events --follow from the start.
	var follow testlog.Buffer
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan int, 1)
	go func() {
		args := []string{"dvms", "events", "--follow", "--nats-url", ns.ClientURL(), "--region", opsRegion, "--host", "compute-1"}
		followed <- runContext(followCtx, args, &follow, &follow)
	}()
	waitUntil(t, 90*time.Second, "overload solved", func() bool {
		return sum(scrape(t, a1), "dvms_events_ended_total", `kind="overload"`, `outcome="solved"`) >= 1
	})
	if cloud.Overloaded("compute-1") {
		t.Error("compute-1 still overloaded after its event was solved")
	}
	m1, m2 := scrape(t, a1), scrape(t, a2)
	both := func(name string, want ...string) float64 { return sum(m1, name, want...) + sum(m2, name, want...) }
	migrations := cloud.Stats().Completed
	checks := []struct {
		what string
		ok   bool
	}{
		{"an overload raised on compute-1", sum(m1, "dvms_events_raised_total", `kind="overload"`) >= 1},
		{"time to fix observed", sum(m1, "dvms_event_fix_seconds_count", `outcome="solved"`) >= 1},
		{"time to solve observed by the planner", both("dvms_event_solve_seconds_count") >= 1},
		{"partition size observed", sum(m1, "dvms_partition_size_count") >= 1},
		{"actions done = migrations Nova completed", both("dvms_actions_total", `kind="live-migrate"`, `outcome="done"`) == float64(migrations) && migrations > 0},
		{"messages sent", both("dvms_messages_sent_total") > 0},
		{"solver timed", both("dvms_solver_seconds_count") >= 1},
		{"two members", sum(m1, "dvms_members") == 2 && sum(m2, "dvms_members") == 2},
		{"compute-1 is the maintenance watch", sum(m1, "dvms_maintenance_watch") == 1 && sum(m2, "dvms_maintenance_watch") == 0},
		{"Nova requests by template", sum(m1, "dvms_nova_requests_total", `service="compute"`, `path="/servers/detail`) > 0},
		{"live migrations counted on the planner's meter",
			both("dvms_nova_requests_total", `method="POST"`, `path="/servers/{id}/action"`) >= float64(migrations)},
		{"build info", sum(m1, "dvms_build_info", `host="compute-1"`) == 1},
		{"a local arbiter has no Raft voter nor leader", hasSeries(m1, "dvms_arbiter_voter") && hasSeries(m1, "dvms_arbiter_leader") &&
			sum(m1, "dvms_arbiter_voter")+sum(m1, "dvms_arbiter_leader") == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("metrics: want %s", c.what)
		}
	}
	if t.Failed() {
		t.Logf("compute-1:\n%v\ncompute-2:\n%v", m1, m2)
	}

	// dvms status -f json, through the command line.
	var out, errOut bytes.Buffer
	args := []string{"dvms", "status", "--nats-url", ns.ClientURL(), "--region", opsRegion, "-f", "json"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("dvms status: exit %d: %s", code, errOut.String())
	}
	var st struct {
		Agents []struct {
			Host, State string
			Watch       bool
		} `json:"agents"`
		Events []struct {
			Event, Host, Outcome string
			Moves                int
		} `json:"events"`
		Arbiter []map[string]any `json:"arbiter"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, out.String())
	}
	if len(st.Agents) != 2 || st.Agents[0].Host != "compute-1" || !st.Agents[0].Watch || st.Agents[1].Host != "compute-2" {
		t.Errorf("status agents: %+v", st.Agents)
	}
	if len(st.Arbiter) != 1 || st.Arbiter[0]["Kind"] != "local" || st.Arbiter[0]["Seen By"] != "compute-1 compute-2" {
		t.Errorf("status arbiter: %v", st.Arbiter)
	}
	solved := false
	for _, e := range st.Events {
		solved = solved || (e.Host == "compute-1" && e.Outcome == "solved" && e.Moves > 0)
	}
	if !solved {
		t.Errorf("status events: no solved event of compute-1 with moves: %+v", st.Events)
	}

	// dvms events -f json: every migration Nova completed is an action
	// done, with dvms's request id of its event and Nova's own.
	out.Reset()
	args = []string{"dvms", "events", "--nats-url", ns.ClientURL(), "--region", opsRegion, "--host", "compute-2", "-f", "json"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("dvms events: exit %d: %s", code, errOut.String())
	}
	var evs []struct {
		Event, Host, Outcome string
		Actions              []map[string]string
	}
	if err := json.Unmarshal(out.Bytes(), &evs); err != nil {
		t.Fatalf("events json: %v\n%s", err, out.String())
	}
	done := 0
	for _, e := range evs {
		for _, a := range e.Actions {
			if a["outcome"] != "done" {
				continue
			}
			done++
			if a["request_id"] != node.RequestID(e.Event) || !strings.HasPrefix(a["nova_request_id"], "req-") {
				t.Errorf("event %s: action %v: want request ids %s and Nova's", e.Event, a, node.RequestID(e.Event))
			}
		}
	}
	if done != migrations {
		t.Errorf("dvms events --host compute-2 shows %d actions done, Nova completed %d migrations:\n%s", done, migrations, out.String())
	}

	// What --follow printed: the event raised and its migration, with
	// both request ids.
	defer func() {
		if t.Failed() {
			t.Logf("follow output:\n%s", follow.String())
		}
	}()
	waitUntil(t, 10*time.Second, "dvms events --follow shows the raise and the migration", func() bool {
		s := follow.String()
		return strings.Contains(s, " overload compute-1 event-raised") &&
			regexp.MustCompile(`live-migrate s-1-\d compute-1 -> compute-2 done req-[0-9a-f-]+ req-`).MatchString(s)
	})
	stopFollow()
	if code := <-followed; code != 0 {
		t.Errorf("dvms events --follow: exit %d:\n%s", code, follow.String())
	}
	t.Logf("dvms events --follow --host compute-1:\n%s", follow.String())

	// The tables an operator reads, in the log for the curious.
	for _, cmd := range [][]string{{"status"}, {"events", "-c", "event", "-c", "outcome", "-c", "actions"}} {
		out.Reset()
		args = append([]string{"dvms"}, cmd...)
		args = append(args, "--nats-url", ns.ClientURL(), "--region", opsRegion)
		if code := run(args, &out, &errOut); code != 0 {
			t.Fatalf("dvms %s: exit %d: %s", cmd[0], code, errOut.String())
		}
		t.Logf("dvms %s:\n%s", strings.Join(cmd, " "), out.String())
	}

	// NATS gone: /healthz says so.
	ns.Shutdown()
	waitUntil(t, 10*time.Second, "/healthz 503 without NATS", func() bool { return healthz(t, a1) == http.StatusServiceUnavailable })
}

// In advise mode the agents plan compute-1's overload, `dvms plans` shows
// the plan and its moves, and Nova shows no migration.
func TestAdvisedPlansAreListed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two agents for several seconds")
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	cloud := opsCloud(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An advised event ends with its moves skipped: the agent raises it
	// again after the backoff (short here) and plans it again.
	advise := func(c *daemon.Config) { c.Runtime.Exec.DryRun, c.Agent.RetryBackoff = true, 500*time.Millisecond }
	a1 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-1", advise)
	a2 := startOpsAgent(t, ctx, cloud, ns.ClientURL(), "compute-2", advise)
	defer func() {
		cancel()
		for _, a := range []*daemon.Proc{a1, a2} {
			if err := a.WaitClosed(); err != nil {
				t.Error(err)
			}
		}
	}()
	var plans []struct {
		Event, Host string
		Moves       []map[string]string
		Advised     int
	}
	var out, errOut bytes.Buffer
	waitUntil(t, 90*time.Second, "an advised plan listed, advised twice", func() bool {
		out.Reset()
		args := []string{"dvms", "plans", "--nats-url", ns.ClientURL(), "--region", opsRegion, "-f", "json"}
		if code := run(args, &out, &errOut); code != 0 {
			t.Fatalf("dvms plans: exit %d: %s", code, errOut.String())
		}
		return json.Unmarshal(out.Bytes(), &plans) == nil && len(plans) > 0 && plans[0].Advised >= 2
	})
	p := plans[0]
	if len(plans) != 1 || p.Host != "compute-1" || len(p.Moves) == 0 || p.Moves[0]["from"] != "compute-1" || p.Moves[0]["recheck"] != "holds" {
		t.Errorf("advised plan, listed once: %s", out.String())
	}
	if st := cloud.Stats(); st.Started != 0 {
		t.Errorf("advise mode, yet Nova started %d migrations", st.Started)
	}
	if m := scrape(t, a1); sum(m, "dvms_advise_mode") != 1 {
		t.Error("dvms_advise_mode is not 1 in advise mode")
	}
}
