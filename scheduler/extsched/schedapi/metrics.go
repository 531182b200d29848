package schedapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dvms-project/dvms/scheduler/extsched"
)

// Results of a scheduling request (dvms_schedapi_requests_total): only
// "answered" carries an order; every other one makes Nova keep its own.
const (
	resultAnswered     = "answered"
	resultUnauthorized = "unauthorized"  // no valid token (401)
	resultLimited      = "limited"       // too many in progress (429)
	resultBadRequest   = "bad_request"   // unreadable or too large (400)
	resultBadMethod    = "wrong_method"  // not a POST (405)
	failSpec           = "spec"          // answered, but the spec was not understood
	failKept           = "nova_order"    // answered with Nova's order as a whole (rebuild, affinity, no candidates, all avoided)
	tierNone           = "no_candidates" // answered with no host
)

// Causes of a fail-open answer: the refusals, and the answers that keep
// Nova's order as a whole.
var failCauses = []string{resultUnauthorized, resultLimited, resultBadRequest, resultBadMethod, failSpec, failKept}

// MetricNames lists the families of scheduler-api's /metrics, every one
// there from the start (the Grafana dashboard test reads it).
var MetricNames = []string{
	"dvms_schedapi_requests_total", "dvms_schedapi_answers_total", "dvms_schedapi_fail_open_total",
	"dvms_schedapi_request_seconds", "dvms_schedapi_hosts", "dvms_schedapi_hosts_fresh",
	"dvms_schedapi_summaries_rejected_total", "dvms_schedapi_reservations_total",
	"dvms_schedapi_authentication", "dvms_schedapi_in_flight", "dvms_schedapi_ready",
}

// metrics are the service's Prometheus metrics, on a registry of its own,
// every series labelled with the region.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	answers  *prometheus.CounterVec
	failOpen *prometheus.CounterVec
	latency  prometheus.Histogram
}

func newMetrics(s *Service) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"region": s.cfg.Region}, m.reg)
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_schedapi_requests_total",
		Help: "Scheduling requests (POST " + extsched.Path + "), by result: answered, or refused (unauthorized, limited, bad_request, wrong_method: Nova keeps its order)."}, []string{"result"})
	m.answers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_schedapi_answers_total",
		Help: "Answers, by the tier of the host put first (roomy, tight, unknown: no fresh summary, avoided; no_candidates)."}, []string{"tier"})
	m.failOpen = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_schedapi_fail_open_total",
		Help: "Requests where Nova kept its own order, by cause: a refusal (unauthorized, limited, bad_request, wrong_method), " +
			"a spec not understood (spec), or an answer that keeps Nova's order as a whole (nova_order: rebuild, affinity, every candidate avoided)."}, []string{"cause"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dvms_schedapi_request_seconds",
		Help:    "Time to answer a scheduling request, from its arrival to the answer written (refusals included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	reg.MustRegister(m.requests, m.answers, m.failOpen, m.latency)
	for _, r := range []string{resultAnswered, resultUnauthorized, resultLimited, resultBadRequest, resultBadMethod} {
		m.requests.WithLabelValues(r)
	}
	for _, t := range []extsched.Tier{extsched.Roomy, extsched.Tight, extsched.Unknown, extsched.Avoided} {
		m.answers.WithLabelValues(t.String())
	}
	m.answers.WithLabelValues(tierNone)
	for _, c := range failCauses {
		m.failOpen.WithLabelValues(c)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(
		gauge("dvms_schedapi_hosts", "Hosts whose summary the service holds, fresh or not.", func() float64 { return float64(s.Health().Hosts) }),
		gauge("dvms_schedapi_hosts_fresh", "Hosts with a fresh summary (younger than stale_after): the ones it can order.", func() float64 { return float64(s.Health().Fresh) }),
		gauge("dvms_schedapi_ready", "1 while the service knows at least one fresh host (/healthz 200), else 0 (/healthz 503: every answer keeps Nova's order).",
			func() float64 { return float64(s.Health().Ready) }),
		counter("dvms_schedapi_summaries_rejected_total", "Summaries refused: unreadable, or on another host's subject.", func() float64 { return float64(s.rejected.Load()) }),
		counter("dvms_schedapi_reservations_total", "Boots counted as pending on the host put first (authenticated callers only).", func() float64 { return float64(s.reserved.Load()) }),
		gauge("dvms_schedapi_authentication", "1 when callers must send the token (token_file set).", func() float64 { return float64(b2i(s.token != "")) }),
		gauge("dvms_schedapi_in_flight", "Scheduling requests in progress.", func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.inFlight)
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// refused counts a request Nova gets no order for.
func (m *metrics) refused(result string) {
	m.requests.WithLabelValues(result).Inc()
	m.failOpen.WithLabelValues(result).Inc()
}

// answered counts an answer: the tier of its first host, and whether it
// keeps Nova's order as a whole.
func (m *metrics) answered(d extsched.Decision, specErr error) {
	m.requests.WithLabelValues(resultAnswered).Inc()
	switch {
	case specErr != nil:
		m.failOpen.WithLabelValues(failSpec).Inc()
	case d.Reason != "" && len(d.Hosts) > 0:
		m.failOpen.WithLabelValues(failKept).Inc()
	}
	tier := tierNone
	if len(d.Hosts) > 0 {
		tier = extsched.Unknown.String()
		for _, r := range d.Ranked {
			if r.Host == d.Hosts[0] {
				tier = r.Tier.String()
				break
			}
		}
	}
	m.answers.WithLabelValues(tier).Inc()
}

// handler serves /metrics.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
