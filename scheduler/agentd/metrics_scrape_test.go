package agentd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dvms-project/dvms/internal/promcheck"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// A freshly started agent serves every family on /metrics before any
// event, each series with its region and host; Prometheus's text parser
// and promtool accept it; the Go and process collectors are there; the
// Nova families come with the first request, latency as a histogram.
func TestFreshAgentMetrics(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := testAgent(t, ctx, url, "r1", func(o *Options, cloud *fake.Cloud) {
		o.MetricsListen, o.Meter = "127.0.0.1:0", cloud.Meter()
	})
	actx, stop := context.WithCancel(ctx)
	defer func() { stop(); _ = a.Wait() }()
	a.Start(actx)
	if a.MetricsAddr() == "" {
		t.Fatal("no /metrics")
	}
	body, fams := promcheck.Scrape(t, "http://"+a.MetricsAddr()+"/metrics")
	dvms, series := 0, 0
	for n, f := range fams {
		if strings.HasPrefix(n, "dvms_") {
			dvms++
			series += len(f.GetMetric())
		}
	}
	t.Logf("fresh agent: %d dvms families (%d series), %d families in all, %d bytes", dvms, series, len(fams), len(body))
	for _, n := range append(slices.Clone(metricNames), "go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes") {
		f := fams[n]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("%s: not on /metrics at start", n)
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["region"] != "r1" || l["host"] != "c1" {
				t.Errorf("%s: labels %v, want region r1 and host c1", n, l)
			}
		}
	}
	for _, n := range []string{"dvms_events_raised_total", "dvms_events_ended_total", "dvms_actions_total", "dvms_messages_sent_total"} {
		if f := fams[n]; f != nil && len(f.GetMetric()) < 3 {
			t.Errorf("%s: %d series at start, want one per known label value", n, len(f.GetMetric()))
		}
	}
	// The agent's first cycle reads the (fake) cloud, which meters it.
	testwait.Until(t, 20*time.Second, "the Nova families", func() (bool, string) {
		_, fams = promcheck.Scrape(t, "http://"+a.MetricsAddr()+"/metrics")
		var missing []string
		for _, n := range novaMetricNames {
			if fams[n] == nil {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, fmt.Sprint("missing ", missing)
	})
	if f := fams["dvms_nova_request_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM ||
		len(f.GetMetric()[0].GetHistogram().GetBucket()) != len(nova.LatencyBounds)+1 {
		t.Errorf("dvms_nova_request_seconds: %s, want a histogram of %d buckets and +Inf", f.GetType(), len(nova.LatencyBounds))
	}
	if body, _ := promcheck.Scrape(t, "http://"+a.MetricsAddr()+"/metrics"); !strings.Contains(string(body), `dvms_nova_request_seconds_bucket{`) {
		t.Errorf("no histogram buckets:\n%s", body)
	}
}
