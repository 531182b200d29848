package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/extsched"
)

// `dvms scheduler-api` (issue 15): Nova's external scheduler. It keeps the
// region's view from the agents' summaries over NATS and answers
// POST /scheduler/nova/external with cortex's request and response shapes
// (scheduler/extsched). It never reads Nova, and never fails a boot: any
// doubt keeps Nova's order.

func init() {
	commands = append(commands, &cli.Command{
		Name:  "scheduler-api",
		Usage: "Nova's external scheduler: order candidate hosts by the demand the agents measure",
		Description: "Listens on [scheduler_api] listen for POST " + extsched.Path + " (the request and\n" +
			"response shapes of cortex's external scheduler API, so Nova's external-scheduler hook or the\n" +
			"dvms_nova weigher can call it) and GET /healthz. Reads the summaries the agents publish over\n" +
			"NATS; needs no OpenStack credentials. Several replicas behind one URL are fine.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "listen", Usage: "HTTP address (overrides [scheduler_api] listen)"},
			&cli.StringFlag{Name: "nats-url", Usage: "NATS server URL(s) (overrides [nats] url)"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides [DEFAULT] log_level)"},
		),
		Action: runSchedAPI,
	})
}

// schedAPIConfig loads the agents' configuration file for the service:
// no cloud is needed.
func schedAPIConfig(c *cli.Context) (fileConfig, error) {
	src := fileSource(c)
	for flag, opt := range map[string][2]string{
		"listen": {"scheduler_api", "listen"}, "nats-url": {"nats", "url"}, "log-level": {"DEFAULT", "log_level"},
	} {
		if c.IsSet(flag) {
			src.flags = append(src.flags, flagValue{lookupOption(opt[0], opt[1]), c.String(flag)})
		}
	}
	if lv, ok := logLevel(c); ok && !c.IsSet("log-level") { // dvms --log-level LEVEL scheduler-api
		src.flags = append(src.flags, flagValue{lookupOption("DEFAULT", "log_level"), lv})
	}
	cfg, err := loadConfig(src, "scheduler-api")
	return cfg, withoutCloudError(err)
}

// withoutCloudError drops errNoCloud from loadConfig's list of problems.
func withoutCloudError(err error) error {
	if err == nil {
		return nil
	}
	var keep []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !errors.Is(e, errNoCloud) {
				keep = append(keep, e)
			}
		}
		return errors.Join(keep...)
	}
	if errors.Is(err, errNoCloud) {
		return nil
	}
	return err
}

func runSchedAPI(c *cli.Context) error {
	cfg, err := schedAPIConfig(c)
	if err != nil {
		return fmt.Errorf("scheduler-api configuration:\n%w", err)
	}
	log := newLogger(cfg.LogLevel, cfg.LogFormat).With().Str("service", "scheduler-api").Logger()
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p, err := startSchedAPI(ctx, cfg, time.Now, log)
	if err != nil {
		return err
	}
	return p.wait()
}

// schedAPIProc is a running service.
type schedAPIProc struct {
	api  *schedAPI
	addr string
	done chan error
}

// natsRetry is how long scheduler-api waits between attempts to make its
// first NATS connection (later ones are the client's reconnects).
const natsRetry = 2 * time.Second

// startSchedAPI serves HTTP at once and subscribes to the region's
// summaries as soon as NATS answers (until then every host is unknown:
// Nova's order), until ctx ends; now is the clock of staleness (time.Now).
func startSchedAPI(ctx context.Context, cfg fileConfig, now func() time.Time, log zerolog.Logger) (*schedAPIProc, error) {
	if cfg.KeysDir != "" {
		// A bad keyring is a configuration error: refuse to start rather
		// than serve without summaries.
		if _, err := auth.LoadKeyring(cfg.KeysDir); err != nil {
			return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
		}
	}
	api := newSchedAPI(cfg.SchedAPI, now, log)
	ln, err := net.Listen("tcp", cfg.SchedAPIListen)
	if err != nil {
		return nil, fmt.Errorf("[scheduler_api] listen %s: %w", cfg.SchedAPIListen, err)
	}
	srv := &http.Server{Handler: api.handler(), ReadHeaderTimeout: 5 * time.Second}
	p := &schedAPIProc{api: api, addr: ln.Addr().String(), done: make(chan error, 1)}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		api.subscribe(subCtx, cfg)
	}()
	go func() {
		var err error
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = srv.Shutdown(sctx)
			cancel()
			<-serveDone
		case err = <-serveDone:
		}
		stopSub()
		<-subDone
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		p.done <- err
	}()
	log.Info().Str("listen", p.addr).Str("region", cfg.Runtime.Region).Str("nats", bus.RedactURLs(cfg.NATSURL)).
		Dur("stale_after", cfg.SchedAPI.StaleAfter).Msg("scheduler-api started")
	return p, nil
}

// schedAPIBusConfig is scheduler-api's NATS connection: it is no agent,
// so it never authenticates as an agent's key (nkey_auth, shared with
// the agents in one dvms.conf) but with [nats] nkey_seed.
func schedAPIBusConfig(cfg fileConfig) bus.Config {
	cfg.NATSNkeyAuth = false
	return cfg.busConfig(cfg.NATSURL)
}

// subscribe connects to NATS (retrying every natsRetry until it answers)
// and receives the summaries until ctx ends.
func (a *schedAPI) subscribe(ctx context.Context, cfg fileConfig) {
	bc := schedAPIBusConfig(cfg)
	bc.Name = "dvms-scheduler-api"
	bc.OnStateChange = func(event string, err error) {
		a.log.Warn().Err(err).Str("nats", event).Msg("NATS connection state changed")
	}
	var tr *bus.NATS
	for {
		var err error
		if tr, err = bus.ConnectNATS(ctx, bc); err == nil {
			break
		}
		a.log.Warn().Err(err).Str("nats", bus.RedactURLs(cfg.NATSURL)).Dur("retry", natsRetry).
			Msg("NATS not reachable: no summaries, every host keeps Nova's order")
		t := time.NewTimer(natsRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	defer func() { _ = tr.Close() }()
	subj := bus.SummarySubject(cfg.Runtime.Region, "*")
	sub, err := subscribeVerified(cfg, tr, subj, a.receive, a.log)
	if err != nil {
		a.log.Error().Err(err).Str("subject", subj).Msg("no summaries: every host keeps Nova's order")
		<-ctx.Done()
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	a.log.Info().Str("subject", subj).Msg("receiving the agents' summaries")
	<-ctx.Done()
}

// wait returns when the service stopped.
func (p *schedAPIProc) wait() error {
	if err := <-p.done; err != nil {
		return fmt.Errorf("scheduler-api: %w", err)
	}
	p.api.log.Info().Msg("scheduler-api stopped")
	return nil
}

// schedAPI is the service's state: the region's view and the weighing.
type schedAPI struct {
	cfg  extsched.Config
	view *extsched.View
	now  func() time.Time
	log  zerolog.Logger

	mu       sync.Mutex
	rejected int // malformed summaries
}

func newSchedAPI(cfg extsched.Config, now func() time.Time, log zerolog.Logger) *schedAPI {
	return &schedAPI{cfg: cfg, view: extsched.NewView(cfg.StaleAfter, cfg.PendingTTL), now: now, log: log}
}

// receive is the bus handler of the summaries.
func (a *schedAPI) receive(subject string, data []byte) {
	s, err := extsched.DecodeSummary(data)
	if err == nil && !strings.HasSuffix(subject, "."+s.Host) {
		err = fmt.Errorf("summary of %q on %s", s.Host, subject)
	}
	if err != nil {
		a.mu.Lock()
		a.rejected++
		a.mu.Unlock()
		a.log.Warn().Err(err).Str("subject", subject).Msg("summary rejected")
		return
	}
	a.view.Update(s, a.now())
}

func (a *schedAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(extsched.Path, a.schedule)
	mux.HandleFunc("/healthz", a.health)
	return mux
}

// maxRequest bounds a request body (a RequestSpec with thousands of hosts
// stays far below).
const maxRequest = 8 << 20

// requestID is Nova's request id if the caller sent one.
func requestID(r *http.Request) string {
	for _, h := range []string{"X-OpenStack-Request-ID", "X-Openstack-Request-Id", "X-Request-ID"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return ""
}

func (a *schedAPI) schedule(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	rid := requestID(r)
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	var req extsched.Request
	if err == nil && len(body) > maxRequest {
		err = errors.New("request body too large")
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		// Nova keeps its own order on any error: fail-open.
		a.log.Warn().Err(err).Str("request_id", rid).Msg("scheduling request rejected: Nova keeps its order")
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	now := a.now()
	names := make([]string, len(req.Hosts))
	for i, h := range req.Hosts {
		names[i] = h.Name()
	}
	spec, serr := extsched.ParseSpec(req.Spec)
	var d extsched.Decision
	if serr != nil {
		d = extsched.Decision{Hosts: names, Reason: "spec not understood (" + serr.Error() + "): Nova's order"}
	} else {
		d = extsched.Weigh(a.cfg, spec, req, a.view.States(names, now))
		if len(d.Hosts) > 0 && d.Reason == "" && !req.Rebuild {
			a.view.Reserve(d.Hosts[0], float64(spec.VCPUs), float64(spec.RAMMB), now)
		}
	}
	if d.Hosts == nil {
		d.Hosts = []string{}
	}
	if rid == "" {
		rid = spec.InstanceUUID
	}
	a.logDecision(rid, spec, req, d)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(extsched.Response{Hosts: d.Hosts})
}

func (a *schedAPI) logDecision(rid string, spec extsched.Spec, req extsched.Request, d extsched.Decision) {
	reasons := make([]string, 0, len(d.Ranked))
	for _, r := range d.Ranked {
		s := fmt.Sprintf("%s: %s", r.Host, r.Tier)
		if r.Dropped {
			s += " (dropped)"
		}
		reasons = append(reasons, s+": "+r.Reason)
	}
	e := a.log.Info().Str("event", "schedule").Str("request_id", rid).Str("server", spec.InstanceUUID).
		Str("flavor", spec.Flavor).Int("vcpus", spec.VCPUs).Int("ram_mb", spec.RAMMB).Int("candidates", len(req.Hosts)).
		Strs("hosts", d.Hosts).Strs("reasons", reasons)
	if spec.GroupPolicy != "" {
		e = e.Str("group_policy", spec.GroupPolicy)
	}
	if d.Reason != "" {
		e = e.Str("reason", d.Reason)
	}
	e.Msg("scheduling answer")
}

// health reports the view: hosts known and fresh.
func (a *schedAPI) health(w http.ResponseWriter, _ *http.Request) {
	hosts := a.view.Hosts()
	fresh := 0
	for _, st := range a.view.States(hosts, a.now()) {
		if st.Fresh {
			fresh++
		}
	}
	a.mu.Lock()
	rejected := a.rejected
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"hosts": len(hosts), "fresh": fresh, "rejected_summaries": rejected})
}
