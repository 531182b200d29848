package agentd

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/oscillation"
	"github.com/dvms-project/dvms/scheduler/status"
)

// agentMetrics are the Prometheus metrics of one agent, on a registry of
// their own (no process-global state). The runner's hooks feed the
// counters and histograms; gauges are read from the agent's parts at
// scrape time. Every series carries the agent's region and host as
// labels (the agent knows both for sure; a scrape configuration need
// not), and every family is there from the start: labelled ones with a
// zero series for each label value known in advance. The Go runtime's
// and the process's collectors (go_*, process_*) come along.
type agentMetrics struct {
	reg *prometheus.Registry

	records    *prometheus.CounterVec
	raised     *prometheus.CounterVec
	ended      *prometheus.CounterVec
	solveTime  *prometheus.HistogramVec
	fixTime    *prometheus.HistogramVec
	partSize   prometheus.Histogram
	merges     *prometheus.CounterVec
	actions    *prometheus.CounterVec
	completion *prometheus.CounterVec
	sent       *prometheus.CounterVec
	stale      prometheus.Counter
	solverTime prometheus.Histogram
	// oscillations: fed by oscillationHooks (scheduler/oscillation).
	oscillations *prometheus.CounterVec
	messagesBad  prometheus.CounterFunc
}

// metricsSources are what the gauges read at scrape time; nil ones are
// not registered.
type metricsSources struct {
	dropped   func() int64            // runner: messages dropped (malformed, inbox full)
	bounded   func() map[string]int64 // runner: messages dropped by the bounds on one key, by reason
	members   func() int              // live members, this agent included
	watch     func() bool             // this agent is the maintenance watch
	partition func() *scheduler.Partition
	arbiter   func() *status.ArbiterInfo // nil result: unknown
	// coverage: what the demand source sees of the host (ok false: it
	// does not say; the gauges read 0 then).
	coverage func() (cgroup.Coverage, bool)
	host     string
	region   string
	version  string // the agent's build version
	meter    *nova.Meter
	// The operators' controls as they apply to this agent (nil: not
	// registered).
	advise, paused, excluded func() bool
}

// metricNames lists every dvms metric family an agent registers (the
// Grafana dashboard test reads it). All but novaMetricNames are there
// from the start.
var metricNames = []string{
	"dvms_build_info", "dvms_advise_mode", "dvms_paused", "dvms_excluded",
	"dvms_records_total", "dvms_events_raised_total", "dvms_events_ended_total",
	"dvms_event_solve_seconds", "dvms_event_fix_seconds", "dvms_partition_size",
	"dvms_merges_total", "dvms_actions_total", "dvms_migration_completion_total", "dvms_messages_sent_total",
	"dvms_messages_stale_total", "dvms_messages_dropped_total", "dvms_messages_bounded_total", "dvms_solver_seconds",
	"dvms_members", "dvms_maintenance_watch", "dvms_in_partition", "dvms_partition_leader",
	"dvms_arbiter_voter", "dvms_arbiter_leader", "dvms_arbiter_term",
	"dvms_demand_blind", "dvms_demand_servers_listed", "dvms_demand_servers_measured",
	"dvms_oscillations_total",
}

// novaMetricNames are the families of the requests to Nova, placement
// and keystone, by request template: there from the agent's first
// request (templates are not known in advance).
var novaMetricNames = []string{"dvms_nova_requests_total", "dvms_nova_request_errors_total", "dvms_nova_request_seconds"}

// Event-level latencies span a second (a solve) to an hour (a drain).
var eventBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

func newAgentMetrics(src metricsSources) *agentMetrics {
	m := &agentMetrics{reg: prometheus.NewRegistry()}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"region": src.region, "host": src.host}, m.reg)
	m.records = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_records_total",
		Help: "Records of the agent's state machine, by kind (event-raised, joined, blocked, planned, merge-committed...)."}, []string{"kind"})
	m.raised = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_events_raised_total",
		Help: "Events this agent raised on its host, by kind."}, []string{"kind"})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_events_ended_total",
		Help: "Events of this agent's host that ended, by kind, outcome and class (why: executed, relieved, vanished, skipped, partition_timeout...)."}, []string{"kind", "outcome", "class"})
	m.solveTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dvms_event_solve_seconds",
		Help: "Time to solve: from an event's detection to its plan, on the agent that planned it.", Buckets: eventBuckets}, []string{"kind"})
	m.fixTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dvms_event_fix_seconds",
		Help: "Time to fix: from an event's detection to its end, on the agent that raised it.", Buckets: eventBuckets}, []string{"kind", "outcome"})
	m.partSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dvms_partition_size",
		Help: "Nodes of the partition when an event of this host ended.", Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}})
	m.merges = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_merges_total",
		Help: "Partition merges this agent proposed, by arbiter decision (committed, refused)."}, []string{"result"})
	m.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_actions_total",
		Help: "Nova actions of the plans this agent executed, by kind, outcome (done, skipped, failed) and reason class."}, []string{"kind", "outcome", "reason"})
	m.completion = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_migration_completion_total",
		Help: "force_complete and abort requests the completion policy sent for live migrations that did not converge, " +
			"by action and by what Nova said (accepted; ended: 409, it had ended meanwhile; refused: 400/404 for its state; failed)."}, []string{"action", "result"})
	m.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_messages_sent_total",
		Help: "Protocol messages sent, by type."}, []string{"type"})
	m.stale = prometheus.NewCounter(prometheus.CounterOpts{Name: "dvms_messages_stale_total",
		Help: "Protocol messages received and ignored by the state machine (stale version, ended partition, too many hops)."})
	m.solverTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dvms_solver_seconds",
		Help: "Wall time of one solve and plan on this agent.", Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	m.oscillations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_oscillations_total",
		Help: "Oscillations this agent noticed (observed only): host_relieved, its host's OVERLOAD events ended solved oscillation_events times " +
			"within oscillation_window; server_moved_back, a server moved back where a plan it executed or adopted took it from, within oscillation_window."}, []string{"kind"})
	reg.MustRegister(m.records, m.raised, m.ended, m.solveTime, m.fixTime, m.partSize, m.merges, m.actions, m.completion, m.sent, m.stale, m.solverTime, m.oscillations)
	m.zeroes()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dvms_build_info", Help: "Always 1: the agent's build version."}, []string{"version"})
	info.WithLabelValues(src.version).Set(1)
	reg.MustRegister(info)
	for _, g := range []struct {
		name, help string
		f          func() bool
	}{
		{"dvms_advise_mode", "1 when this agent's host is in advise mode (plans re-checked, not executed): dvms mode, else advise_only.", src.advise},
		{"dvms_paused", "1 while the operator paused the region (dvms pause): no new event, no action started.", src.paused},
		{"dvms_excluded", "1 while the operator excluded this agent's host (dvms exclude): never a source nor a destination.", src.excluded},
	} {
		if g.f != nil {
			f := g.f
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, func() float64 { return b2f(f()) }))
		}
	}
	if src.dropped != nil {
		m.messagesBad = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dvms_messages_dropped_total",
			Help: "Protocol messages dropped on receipt: malformed, or the agent's inbox full."}, func() float64 { return float64(src.dropped()) })
		reg.MustRegister(m.messagesBad)
	}
	if src.bounded != nil {
		for _, reason := range []string{node.BoundRate, node.BoundRefused} {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "dvms_messages_bounded_total",
				Help:        "Protocol messages dropped on receipt by the bounds on one key: rate (its sender past sender_rate) or refused (about a partition led by a key past lead_timeout, lead_plan_timeout or max_leads).",
				ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(src.bounded()[reason]) }))
		}
	}
	if src.members != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_members",
			Help: "Live members of the region as this agent hears them, itself included."}, func() float64 { return float64(src.members()) }))
	}
	if src.watch != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_maintenance_watch",
			Help: "1 when this agent is the region's maintenance watch (it lists the nova-compute services)."}, func() float64 { return b2f(src.watch()) }))
	}
	if src.partition != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_in_partition",
				Help: "1 when this agent is in a partition."}, func() float64 { return b2f(src.partition() != nil) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_partition_leader",
				Help: "1 when this agent leads a partition."}, func() float64 {
				p := src.partition()
				return b2f(p != nil && p.Leader == src.host)
			}))
	}
	if src.arbiter != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_arbiter_voter",
				Help: "1 when this agent is a voter of the region's merge arbiter (Raft group)."}, func() float64 {
				a := src.arbiter()
				return b2f(a != nil && a.Voter)
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_arbiter_leader",
				Help: "1 when this agent leads the region's merge arbiter (Raft group)."}, func() float64 {
				a := src.arbiter()
				return b2f(a != nil && a.Leader == src.host)
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_arbiter_term",
				Help: "The Raft term of the region's merge arbiter as this agent's raft node knows it (0: it runs none)."}, func() float64 {
				if a := src.arbiter(); a != nil {
					return float64(a.Term)
				}
				return 0
			}))
	}
	if src.coverage != nil {
		cov := func(f func(c cgroup.Coverage) float64) func() float64 {
			return func() float64 {
				c, ok := src.coverage()
				if !ok {
					return 0
				}
				return f(c)
			}
		}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_demand_blind",
				Help: "1 while the demand source finds none of the servers Nova lists running on this host (source = cgroup: no guest cgroup, or none named after them): the host is not measured."},
				cov(func(c cgroup.Coverage) float64 { return b2f(c.Blind) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_demand_servers_listed",
				Help: "Servers Nova last listed running on this host, as the demand source counts them (source = cgroup)."},
				cov(func(c cgroup.Coverage) float64 { return float64(max(c.Listed, 0)) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dvms_demand_servers_measured",
				Help: "Of the servers Nova lists running on this host, those the demand source found and measures (source = cgroup)."},
				cov(func(c cgroup.Coverage) float64 { return float64(c.Measured) })))
	}
	if src.meter != nil {
		reg.MustRegister(meterCollector{src.meter})
	}
	return m
}

// Label values known in advance, for the zero series.
var (
	eventKinds  = []scheduler.EventKind{scheduler.Overload, scheduler.Underload, scheduler.Maintenance}
	outcomes    = []scheduler.Outcome{scheduler.Solved, scheduler.Unsolvable, scheduler.Failed, scheduler.Aborted}
	recordKinds = []scheduler.RecordKind{scheduler.RecEventRaised, scheduler.RecEventEnded, scheduler.RecJoined, scheduler.RecBlocked,
		scheduler.RecPlanned, scheduler.RecNoSolution, scheduler.RecExecuting, scheduler.RecDissolved, scheduler.RecMergeProposed,
		scheduler.RecMergeCommitted, scheduler.RecMergeRefused, scheduler.RecDropped, scheduler.RecMemberRemoved, scheduler.RecReplanning}
	endClasses = []scheduler.EndClass{scheduler.EndExecuted, scheduler.EndForceCompleted, scheduler.EndNothingToDo,
		scheduler.EndRelieved, scheduler.EndNoSolution, scheduler.EndActionFailed, scheduler.EndMigrationAborted,
		scheduler.EndVanished, scheduler.EndSkipped, scheduler.EndUnverified, scheduler.EndAdvise, scheduler.EndPaused,
		scheduler.EndExcluded, scheduler.EndStopping, scheduler.EndSolvedOthers, scheduler.EndMemberLost, scheduler.EndTimeout,
		scheduler.EndRequestLost, scheduler.EndFork, scheduler.EndAbsorbedLost, scheduler.EndLeaderRefused, scheduler.EndLeftForOwners, scheduler.EndNotWorth, scheduler.EndCooling}
	msgTypes    = []scheduler.MsgType{scheduler.MsgGrow, scheduler.MsgUpdate, scheduler.MsgHeartbeat, scheduler.MsgSnapshot, scheduler.MsgDissolve, scheduler.MsgMergeOffer, scheduler.MsgAbsorbed, scheduler.MsgNack}
	actionKinds = []scheduler.ActionKind{scheduler.LiveMigrate, scheduler.Shelve, scheduler.ColdMigrate, scheduler.Notify}
	// The reason classes an action of each outcome ends with.
	actionReasons = map[node.ActionOutcome][]node.ReasonClass{
		node.ActionDone: {node.ReasonNone, node.ReasonForceCompleted, node.ReasonMaintenanceAction, node.ReasonFallback},
		node.ActionSkipped: {node.ReasonAdvise, node.ReasonPaused, node.ReasonExcluded, node.ReasonStopping, node.ReasonCancelled,
			node.ReasonReadFailed, node.ReasonEvent, node.ReasonEventUnverified, node.ReasonServerChanged, node.ReasonServerGroup,
			node.ReasonDestinationDisabled, node.ReasonDestinationBusy, node.ReasonPlacement, node.ReasonOverload, node.ReasonConflict,
			node.ReasonDestinationDistrusted, node.ReasonDestinationImplausible, node.ReasonLeftForOwner},
		node.ActionFailed: {node.ReasonTimeout, node.ReasonFailed, node.ReasonMigrationAborted},
	}
	completionResults = []string{node.CompletionAccepted, node.CompletionEnded, node.CompletionRefused, node.CompletionFailed}
)

// zeroes creates the zero series of every label value known in advance,
// so that dashboards and rate() see the families before the first event.
func (m *agentMetrics) zeroes() {
	for _, k := range recordKinds {
		m.records.WithLabelValues(k.String())
	}
	for _, k := range eventKinds {
		m.raised.WithLabelValues(k.String())
		m.solveTime.WithLabelValues(k.String())
		for _, o := range outcomes {
			m.fixTime.WithLabelValues(k.String(), o.String())
		}
		for _, c := range endClasses {
			m.ended.WithLabelValues(k.String(), c.Outcome().String(), string(c))
		}
	}
	for _, r := range []string{"committed", "refused"} {
		m.merges.WithLabelValues(r)
	}
	for _, k := range actionKinds {
		for o, rs := range actionReasons {
			for _, r := range rs {
				m.actions.WithLabelValues(k.String(), o.String(), string(r))
			}
		}
	}
	for _, a := range []string{node.CompleteAbort, node.CompleteForce} { // the requests it sends
		for _, r := range completionResults {
			m.completion.WithLabelValues(a, r)
		}
	}
	for _, t := range msgTypes {
		m.sent.WithLabelValues(t.String())
	}
	for _, k := range oscillation.Kinds {
		m.oscillations.WithLabelValues(string(k))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// hooks returns the runner hooks that feed m, then j (either may be nil).
func observeHooks(m *agentMetrics, j *journal.Journal, now func() time.Time) node.Hooks {
	return node.Hooks{
		OnRecord: func(_ string, r scheduler.Record) {
			if m != nil {
				m.record(r, now())
			}
			if j != nil {
				j.Record(r)
			}
		},
		OnSend: func(_ string, msg scheduler.Message) {
			if m != nil {
				m.sent.WithLabelValues(msg.Type.String()).Inc()
			}
		},
		OnExec: func(_ string, ev scheduler.Event, res node.ExecResult) {
			if m != nil {
				m.exec(res)
			}
			if j != nil {
				j.Exec(ev, res)
			}
		},
		OnAdopt: func(_ string, ev scheduler.Event, res node.ExecResult) {
			// Not counted as executed actions: the leader counted those it
			// saw end (its own agent's metrics).
			if j != nil {
				j.Adopted(ev, res)
			}
		},
		OnSolve: func(_ string, _ scheduler.SolveRequest, _ scheduler.Solution, took time.Duration) {
			if m != nil {
				m.solverTime.Observe(took.Seconds())
			}
		},
		OnCompletion: func(_ string, what, result string) {
			if m != nil {
				m.completion.WithLabelValues(what, result).Inc()
			}
		},
	}
}

func (m *agentMetrics) record(r scheduler.Record, now time.Time) {
	m.records.WithLabelValues(r.Kind.String()).Inc()
	kind := r.Event.Kind.String()
	switch r.Kind {
	case scheduler.RecEventRaised:
		m.raised.WithLabelValues(kind).Inc()
	case scheduler.RecPlanned:
		if !r.Event.Detected.IsZero() {
			m.solveTime.WithLabelValues(kind).Observe(max(0, now.Sub(r.Event.Detected).Seconds()))
		}
	case scheduler.RecEventEnded:
		o := r.Outcome.String()
		m.ended.WithLabelValues(kind, o, string(r.Class.Of(r.Outcome, r.Reason))).Inc()
		if !r.Event.Detected.IsZero() {
			m.fixTime.WithLabelValues(kind, o).Observe(max(0, now.Sub(r.Event.Detected).Seconds()))
		}
		if r.Size > 0 {
			m.partSize.Observe(float64(r.Size))
		}
	case scheduler.RecMergeCommitted:
		m.merges.WithLabelValues("committed").Inc()
	case scheduler.RecMergeRefused:
		m.merges.WithLabelValues("refused").Inc()
	case scheduler.RecDropped:
		m.stale.Inc()
	}
}

func (m *agentMetrics) exec(res node.ExecResult) {
	for _, a := range res.Actions {
		m.actions.WithLabelValues(a.Action.Kind.String(), a.Outcome.String(), reasonClass(a)).Inc()
	}
}

// reasonClass is the action's reason class as the executor set it
// where it decided (node.ReasonClass); "other" for a result without one.
func reasonClass(a node.ActionResult) string {
	if a.Class == "" {
		return "other"
	}
	return string(a.Class)
}

// meterCollector exports a nova.Meter at scrape time: the requests this
// agent sent to Nova, placement and keystone, by template.
type meterCollector struct{ m *nova.Meter }

var (
	novaReqDesc = prometheus.NewDesc("dvms_nova_requests_total",
		"Requests this agent sent to Nova, placement and keystone, by service, method and path template.", []string{"service", "method", "path"}, nil)
	novaErrDesc = prometheus.NewDesc("dvms_nova_request_errors_total",
		"Requests that got no answer or an error status, by template.", []string{"service", "method", "path"}, nil)
	novaLatDesc = prometheus.NewDesc("dvms_nova_request_seconds",
		"Latency of the requests of a template, answered or not (buckets: powers of two of a microsecond, 1 ms to 67 s).", []string{"service", "method", "path"}, nil)
)

func (c meterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- novaReqDesc
	ch <- novaErrDesc
	ch <- novaLatDesc
}

func (c meterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.m.Snapshot().Templates {
		l := []string{t.Template.Service, t.Template.Method, t.Template.Path}
		ch <- prometheus.MustNewConstMetric(novaReqDesc, prometheus.CounterValue, float64(t.Count), l...)
		ch <- prometheus.MustNewConstMetric(novaErrDesc, prometheus.CounterValue, float64(t.Errors), l...)
	}
	for _, h := range c.m.LatencyHistograms() {
		buckets := make(map[float64]uint64, len(nova.LatencyBounds))
		for i, b := range nova.LatencyBounds {
			buckets[b.Seconds()] = uint64(h.Cumulative[i])
		}
		ch <- prometheus.MustNewConstHistogram(novaLatDesc, uint64(h.Count), h.Sum.Seconds(), buckets,
			h.Template.Service, h.Template.Method, h.Template.Path)
	}
}

// metricsServer serves /metrics and /healthz on one address.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMetricsServer listens on addr; healthy says whether /healthz
// answers 200 (else 503 with the reason).
func startMetricsServer(addr string, reg *prometheus.Registry, healthy func() error) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	s := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *metricsServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server and waits for it.
func (s *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = s.srv.Close()
	}
	<-s.done
}
