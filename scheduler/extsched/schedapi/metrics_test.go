package schedapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/internal/promcheck"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/extschedtest"
)

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func scrapeMetrics(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	_, fams := promcheck.Scrape(t, base+"/metrics")
	return fams
}

// value is the value of the series of family name whose label key is
// val (a counter's, a gauge's, or a histogram's count).
func value(fams map[string]*dto.MetricFamily, name, key, val string) float64 {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if key == "" || l.GetName() == key && l.GetValue() == val {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return -1
}

// A service that knows no host: /healthz 503 with the reason, and every
// family on /metrics from the start, labelled with the region. Once
// summaries arrive it is ready; when they age past stale_after it is not,
// and says so. Its answers are counted by result, tier and fail-open
// cause, and timed.
func TestMetricsAndReadiness(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := DefaultConfig()
	cfg.Region = "r1"
	cfg.TokenFile = tokenFile(t, token+"\n", 0o640)
	s, err := New(extsched.DefaultConfig(), cfg, clock, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, s)
	code, body := get(t, srv+"/healthz")
	var h Health
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusServiceUnavailable || h.Ready != 0 || !strings.Contains(h.Reason, "no summary") {
		t.Fatalf("/healthz with no host: %d %s (%v), want 503 and the reason", code, body, err)
	}
	fams := scrapeMetrics(t, srv)
	for _, n := range append(MetricNames, "go_goroutines", "process_cpu_seconds_total") {
		f := fams[n]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("%s: not on /metrics at start", n)
			continue
		}
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) == 0 || !hasLabel(l, "region", "r1") {
				t.Errorf("%s: no region label", n)
			}
		}
	}
	if v := value(fams, "dvms_schedapi_ready", "", ""); v != 0 {
		t.Errorf("dvms_schedapi_ready %v with no host, want 0", v)
	}

	for _, host := range []string{"a", "b"} {
		data, _ := extsched.Summary{Host: host, At: now, SampledAt: now, CPUs: 8, RAMMB: 16384}.Encode()
		s.Receive("dvms.r1.summary."+host, data)
	}
	if code, body := get(t, srv+"/healthz"); code != http.StatusOK || !strings.Contains(string(body), `"ready":1`) {
		t.Fatalf("/healthz with 2 fresh hosts: %d %s", code, body)
	}
	nova := extschedtest.NovaRequest(2, 2048, "a", "b")
	if code, hosts := post(t, srv, "Bearer "+token, nova); code != 200 || len(hosts) != 2 {
		t.Fatalf("answer %d %v", code, hosts)
	}
	rebuild := bytes.Replace(nova, []byte(`"rebuild":false`), []byte(`"rebuild":true`), 1)
	if code, hosts := post(t, srv, "Bearer "+token, rebuild); code != 200 || len(hosts) != 2 {
		t.Fatalf("rebuild: %d %v", code, hosts)
	}
	if code, _ := post(t, srv, "", nova); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := post(t, srv, "Bearer "+token, []byte("{not json")); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	if code, _ := get(t, srv+extsched.Path); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", code)
	}
	fams = scrapeMetrics(t, srv)
	for _, c := range []struct {
		name, key, val string
		want           float64
	}{
		{"dvms_schedapi_requests_total", "result", "answered", 2},
		{"dvms_schedapi_requests_total", "result", "unauthorized", 1},
		{"dvms_schedapi_requests_total", "result", "bad_request", 1},
		{"dvms_schedapi_requests_total", "result", "wrong_method", 1},
		{"dvms_schedapi_answers_total", "tier", "roomy", 1},
		{"dvms_schedapi_answers_total", "tier", "unknown", 1}, // the rebuild: Nova's order
		{"dvms_schedapi_fail_open_total", "cause", "unauthorized", 1},
		{"dvms_schedapi_fail_open_total", "cause", "bad_request", 1},
		{"dvms_schedapi_fail_open_total", "cause", "nova_order", 1},
		{"dvms_schedapi_fail_open_total", "cause", "spec", 0},
		{"dvms_schedapi_request_seconds", "region", "r1", 5},
		{"dvms_schedapi_hosts_fresh", "region", "r1", 2},
		{"dvms_schedapi_ready", "region", "r1", 1},
		{"dvms_schedapi_reservations_total", "region", "r1", 1},
	} {
		if got := value(fams, c.name, c.key, c.val); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.key, c.val, got, c.want)
		}
	}

	mu.Lock()
	now = now.Add(extsched.DefaultConfig().StaleAfter + time.Second)
	mu.Unlock()
	code, body = get(t, srv+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "none of the 2 hosts") {
		t.Fatalf("/healthz with stale hosts: %d %s, want 503 and the reason", code, body)
	}
	if code, hosts := post(t, srv, "Bearer "+token, nova); code != 200 || len(hosts) != 2 {
		t.Fatalf("answer %d %v", code, hosts)
	}
	if got := value(scrapeMetrics(t, srv), "dvms_schedapi_answers_total", "tier", "unknown"); got != 2 {
		t.Errorf("answers with only stale hosts, tier unknown: %v, want 2", got)
	}
}

func hasLabel(ls []*dto.LabelPair, key, val string) bool {
	for _, l := range ls {
		if l.GetName() == key && l.GetValue() == val {
			return true
		}
	}
	return false
}
