package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/extschedtest"
)

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func eventually(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not hoping
	}
	return cond()
}

// startSchedAPI starts the scheduler-api service of region t on the NATS
// server at url, with clock now; it is stopped (and must stop cleanly) at
// the test's end. The logs are its.
func startSchedAPI(t *testing.T, url string, now func() time.Time) (*SchedAPI, Config, *testlog.Buffer) {
	t.Helper()
	cfg, err := load(t, "[scheduler_api]\nlisten = 127.0.0.1:0\n", "OS_CLOUD=c", "DVMS_REGION=t", "DVMS_NATS_URL="+url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testlog.Buffer{}
	p, err := StartSchedAPI(ctx, cfg, now, zerolog.New(logs))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := p.Wait(); err != nil {
			t.Error(err)
		}
	})
	return p, cfg, logs
}

func TestSchedulerAPIOverNATS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p, cfg, logs := startSchedAPI(t, ns.ClientURL(), clock.now)
	base := "http://" + p.Addr()

	agent, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: "fake-agents"})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	publish := func(s extsched.Summary) {
		s.At, s.Seq = clock.now(), 1
		data, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := agent.Publish(ctx, bus.SummarySubject("t", s.Host), data); err != nil {
			t.Fatal(err)
		}
	}
	host := func(name string, cpu float64) extsched.Summary {
		return extsched.Summary{Host: name, CPUs: 8, RAMMB: 32768, AllocVCPUs: 32, AllocRAMMB: 32768, CPUDemand: cpu, RAMDemand: 4096}
	}
	d := host("drain", 0)
	d.Draining, d.Disabled = true, true
	publishAll := func() {
		// Agents publish again every interval: the service subscribes in
		// the background and takes what arrives once it has.
		publish(host("idle", 0.5))
		publish(host("busy", 7))
		publish(d)
		if err := agent.Publish(ctx, bus.SummarySubject("t", "forged"), []byte(`{"v":1,"host":"idle","at":"2026-01-01T00:00:00Z"}`)); err != nil {
			t.Fatal(err)
		}
	}
	health := func() map[string]int {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var h map[string]int
		_ = json.NewDecoder(resp.Body).Decode(&h)
		return h
	}
	if !eventually(t, 30*time.Second, func() bool {
		publishAll()
		h := health()
		return h["fresh"] == 3 && h["rejected_summaries"] >= 1
	}) {
		t.Fatalf("the service did not take the summaries: %v", health())
	}

	ask := func(rid string, body []byte) (int, []string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+extsched.Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-OpenStack-Request-ID", rid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil
		}
		if len(raw) != 1 {
			t.Errorf("answer has keys %v: Nova's hook accepts {\"hosts\": [...]} only", raw)
		}
		var hosts []string
		if err := json.Unmarshal(raw["hosts"], &hosts); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, hosts
	}
	same := func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

	// Nova ranks busy first and drain second; dvms measured otherwise.
	code, got := ask("req-fresh", extschedtest.NovaRequest(2, 2048, "busy", "drain", "idle", "unknown"))
	if want := []string{"idle", "unknown", "busy", "drain"}; code != 200 || !same(got, want) {
		t.Errorf("answer %d %v, want %v", code, got, want)
	}
	if l := logs.String(); !strings.Contains(l, `"request_id":"req-fresh"`) || !strings.Contains(l, "drain: avoided: draining") ||
		!strings.Contains(l, "busy: tight: over a threshold") {
		t.Errorf("the answer is not logged with its request id and reasons:\n%s", l)
	}

	// Unparseable spec: Nova's order, never an error.
	code, got = ask("req-spec", []byte(`{"spec": {"flavor": {"vcpus": "two"}}, "hosts": [{"host": "busy"}, {"host": "idle"}], "weights": {}}`))
	if want := []string{"busy", "idle"}; code != 200 || !same(got, want) {
		t.Errorf("bad spec: answer %d %v, want %v", code, got, want)
	}
	if code, _ := ask("req-bad", []byte(`{"hosts": [`)); code != http.StatusBadRequest {
		t.Errorf("malformed body: status %d, want 400", code)
	}
	if resp, err := http.Get(base + extsched.Path); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Every summary stale: Nova's order, drain included.
	clock.add(cfg.SchedAPI.StaleAfter + time.Second)
	code, got = ask("req-stale", extschedtest.NovaRequest(2, 2048, "busy", "drain", "idle", "unknown"))
	if want := []string{"busy", "drain", "idle", "unknown"}; code != 200 || !same(got, want) {
		t.Errorf("stale view: answer %d %v, want Nova's order %v", code, got, want)
	}
}

// Without NATS the service answers at once, in Nova's order; it takes the
// summaries once NATS is up.
func TestSchedulerAPIStartsWithoutNATS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := ns.ClientURL()
	ns.Shutdown() // its port is known and nothing listens there
	p, _, logs := startSchedAPI(t, url, time.Now)
	post := func() []string {
		resp, err := http.Post("http://"+p.Addr()+extsched.Path, "application/json", bytes.NewReader(extschedtest.NovaRequest(1, 512, "a", "b")))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r extsched.Response
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return r.Hosts
	}
	if got := post(); strings.Join(got, ",") != "a,b" {
		t.Errorf("without NATS: %v, want Nova's order a,b", got)
	}
	if err := ns.Restart(); err != nil {
		t.Skipf("the embedded NATS server could not take its port back: %v", err)
	}
	defer ns.Shutdown()
	agent, err := bus.ConnectNATS(ctx, bus.Config{URL: url, Name: "fake-agent"})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	busy, _ := extsched.Summary{Host: "a", At: time.Now(), SampledAt: time.Now(), CPUs: 8, RAMMB: 8192, CPUDemand: 8}.Encode()
	idle, _ := extsched.Summary{Host: "b", At: time.Now(), SampledAt: time.Now(), CPUs: 8, RAMMB: 8192}.Encode()
	if !eventually(t, 20*time.Second, func() bool {
		_ = agent.Publish(ctx, bus.SummarySubject("t", "a"), busy)
		_ = agent.Publish(ctx, bus.SummarySubject("t", "b"), idle)
		return strings.Join(post(), ",") == "b,a"
	}) {
		t.Fatalf("summaries never used once NATS came up:\n%s", logs.String())
	}
}
