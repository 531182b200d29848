// Package schedapi is the HTTP side of `dvms scheduler-api`: Nova's
// external scheduler, in its boot path. It answers POST extsched.Path
// with the weighing of package extsched over the region's view, which the
// caller feeds with the agents' summaries (Service.Receive), GET /healthz
// (503 while it knows no fresh host) and GET /metrics (Prometheus). It
// never reads Nova and never fails a boot: any doubt keeps Nova's order.
//
// Defences, as a service every boot goes through: callers authenticate
// with a shared token (Config.TokenFile, sent by the dvms_nova weigher as
// "Authorization: Bearer TOKEN"); only an authenticated call reserves its
// flavor on the host it puts first (pending boots steer later answers, so
// an anonymous caller must not be able to make them); a request must
// arrive whole within BodyTimeout and an idle connection is closed after
// IdleTimeout; one client (IP address) has at most MaxPerClient requests
// in progress, and the whole service MaxInFlight.
package schedapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/extsched"
)

// Config is the service's HTTP side.
type Config struct {
	// TokenFile holds the token callers must send ("" = no
	// authentication: answers are given, but no caller reserves).
	TokenFile string
	// HeaderTimeout, BodyTimeout: the request's header, then the whole
	// request, must have arrived within these of the connection's turn.
	HeaderTimeout, BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout time.Duration
	// MaxPerClient bounds the requests of one client address in
	// progress; MaxInFlight those of all clients.
	MaxPerClient, MaxInFlight int
	// MaxBody bounds a request body (bytes).
	MaxBody int64
	// Region labels every series of /metrics (the caller's region; not
	// an option of its own).
	Region string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{HeaderTimeout: 5 * time.Second, BodyTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
		MaxPerClient: 16, MaxInFlight: 256, MaxBody: 8 << 20}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"header timeout", c.HeaderTimeout}, {"body_timeout", c.BodyTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("schedapi: %s must be > 0", d.name))
		}
	}
	if c.MaxPerClient < 1 || c.MaxInFlight < c.MaxPerClient {
		errs = append(errs, fmt.Errorf("schedapi: max_requests_per_client (%d) must be >= 1 and at most the service's %d", c.MaxPerClient, c.MaxInFlight))
	}
	if c.MaxBody < 1024 {
		errs = append(errs, errors.New("schedapi: the body limit must be at least 1 KiB"))
	}
	return errors.Join(errs...)
}

// LoadToken reads a token file: its first line, at least 16 characters
// once trimmed; a file that others may read is refused (the token lets a
// caller steer boots).
func LoadToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("token_file: %w", err)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return "", fmt.Errorf("token_file %s: mode %04o lets every user read it: chmod o-rwx", path, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token_file: %w", err)
	}
	tok, _, _ := strings.Cut(string(raw), "\n")
	if tok = strings.TrimSpace(tok); len(tok) < 16 {
		return "", fmt.Errorf("token_file %s: the token must be at least 16 characters (e.g. openssl rand -hex 32)", path)
	}
	return tok, nil
}

// Service is the state: the region's view, the weighing, the counters.
type Service struct {
	weigh extsched.Config
	cfg   Config
	token string
	view  *extsched.View
	now   func() time.Time
	log   zerolog.Logger

	mu        sync.Mutex
	perClient map[string]int
	inFlight  int

	rejected, unauthorized, limited, reserved atomic.Int64

	metrics *metrics
}

// New returns the service; with cfg.TokenFile set, the token is read now.
func New(weigh extsched.Config, cfg Config, now func() time.Time, log zerolog.Logger) (*Service, error) {
	if err := errors.Join(weigh.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	s := &Service{weigh: weigh, cfg: cfg, view: extsched.NewView(weigh.StaleAfter, weigh.PendingTTL), now: now, log: log, perClient: map[string]int{}}
	s.metrics = newMetrics(s)
	if cfg.TokenFile != "" {
		tok, err := LoadToken(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		s.token = tok
	}
	return s, nil
}

// Authenticated reports whether callers must authenticate.
func (s *Service) Authenticated() bool { return s.token != "" }

// Server is the HTTP server of the service, with its timeouts.
func (s *Service) Server() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.cfg.HeaderTimeout, ReadTimeout: s.cfg.BodyTimeout,
		WriteTimeout: s.cfg.BodyTimeout, IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// Serve serves on ln until ctx ends, then shuts the server down (5 s
// for the requests in progress); it returns the server's error, nil
// after ctx ended.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.Server()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		<-done
	case err = <-done:
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Handler serves extsched.Path, /healthz and /metrics.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(extsched.Path, s.schedule)
	mux.HandleFunc("/healthz", s.health)
	mux.Handle("/metrics", s.metrics.handler())
	return mux
}

// Receive is the bus handler of the agents' summaries (subject ends with
// the host's name).
func (s *Service) Receive(subject string, data []byte) {
	sum, err := extsched.DecodeSummary(data)
	if err == nil && !strings.HasSuffix(subject, "."+sum.Host) {
		err = fmt.Errorf("summary of %q on %s", sum.Host, subject)
	}
	if err != nil {
		s.rejected.Add(1)
		s.log.Warn().Err(err).Str("subject", subject).Msg("summary rejected")
		return
	}
	s.view.Update(sum, s.now())
}

// Pending is the flavor reserved on host now (for tests and health).
func (s *Service) Pending(host string) (vcpus, ramMB float64) {
	st := s.view.States([]string{host}, s.now())[0]
	return st.PendingVCPUs, st.PendingRAMMB
}

// requestID is Nova's request id if the caller sent one.
func requestID(r *http.Request) string {
	for _, h := range []string{"X-OpenStack-Request-ID", "X-Openstack-Request-Id", "X-Request-ID"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return ""
}

// authorized reports whether r carries the token.
func (s *Service) authorized(r *http.Request) bool {
	if s.token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.token)) == 1
}

// admit counts a request of client in; false when over a limit.
func (s *Service) admit(client string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[client] >= s.cfg.MaxPerClient || s.inFlight >= s.cfg.MaxInFlight {
		return false
	}
	s.perClient[client]++
	s.inFlight++
	return true
}

func (s *Service) release(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[client]--; s.perClient[client] <= 0 {
		delete(s.perClient, client)
	}
	s.inFlight--
}

func clientOf(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

func (s *Service) schedule(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.metrics.latency.Observe(time.Since(start).Seconds()) }()
	if r.Method != http.MethodPost {
		s.metrics.refused(resultBadMethod)
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	rid, client := requestID(r), clientOf(r)
	auth := s.authorized(r)
	if s.token != "" && !auth {
		// Nova keeps its order on any error: fail-open, nothing learnt.
		s.unauthorized.Add(1)
		s.metrics.refused(resultUnauthorized)
		s.log.Warn().Str("client", client).Str("request_id", rid).Msg("scheduling request refused: no valid token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="dvms scheduler-api"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if !s.admit(client) {
		s.limited.Add(1)
		s.metrics.refused(resultLimited)
		s.log.Warn().Str("client", client).Str("request_id", rid).Msg("scheduling request refused: too many in progress")
		w.Header().Set("Connection", "close")
		http.Error(w, "too many requests in progress", http.StatusTooManyRequests)
		return
	}
	defer s.release(client)
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	var req extsched.Request
	if err == nil && int64(len(body)) > s.cfg.MaxBody {
		err = errors.New("request body too large")
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.metrics.refused(resultBadRequest)
		s.log.Warn().Err(err).Str("client", client).Str("request_id", rid).Msg("scheduling request rejected: Nova keeps its order")
		w.Header().Set("Connection", "close")
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	now := s.now()
	names := make([]string, len(req.Hosts))
	for i, h := range req.Hosts {
		names[i] = h.Name()
	}
	spec, serr := extsched.ParseSpec(req.Spec)
	var d extsched.Decision
	if serr != nil {
		d = extsched.Decision{Hosts: names, Reason: "spec not understood (" + serr.Error() + "): Nova's order"}
	} else {
		d = extsched.Weigh(s.weigh, spec, req, s.view.States(names, now))
		// Only an authenticated caller's boot is counted on its host.
		if auth && len(d.Hosts) > 0 && d.Reason == "" && !req.Rebuild {
			s.view.Reserve(d.Hosts[0], float64(spec.VCPUs), float64(spec.RAMMB), now)
			s.reserved.Add(1)
		}
	}
	if d.Hosts == nil {
		d.Hosts = []string{}
	}
	s.metrics.answered(d, serr)
	if rid == "" {
		rid = spec.InstanceUUID
	}
	s.logDecision(rid, spec, req, d)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(extsched.Response{Hosts: d.Hosts})
}

func (s *Service) logDecision(rid string, spec extsched.Spec, req extsched.Request, d extsched.Decision) {
	reasons := make([]string, 0, len(d.Ranked))
	for _, r := range d.Ranked {
		line := fmt.Sprintf("%s: %s", r.Host, r.Tier)
		if r.Dropped {
			line += " (dropped)"
		}
		reasons = append(reasons, line+": "+r.Reason)
	}
	e := s.log.Info().Str("event", "schedule").Str("request_id", rid).Str("server", spec.InstanceUUID).
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

// Health is what /healthz reports.
type Health struct {
	Hosts             int `json:"hosts"`
	Fresh             int `json:"fresh"`
	RejectedSummaries int `json:"rejected_summaries"`
	// Authentication is 1 when callers must send the token (every field
	// is a number: monitoring reads them as such).
	Authentication int `json:"authentication"`
	Unauthorized   int `json:"unauthorized_requests"`
	Limited        int `json:"limited_requests"`
	Reserved       int `json:"reservations"`
	// Ready is 1 when the service knows a fresh host (it can order
	// candidates), 0 otherwise; Reason then says why (the one field
	// that is not a number).
	Ready  int    `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// Health reports the view and the counters.
func (s *Service) Health() Health {
	hosts := s.view.Hosts()
	h := Health{Hosts: len(hosts), RejectedSummaries: int(s.rejected.Load()), Authentication: b2i(s.token != ""),
		Unauthorized: int(s.unauthorized.Load()), Limited: int(s.limited.Load()), Reserved: int(s.reserved.Load())}
	for _, st := range s.view.States(hosts, s.now()) {
		if st.Fresh {
			h.Fresh++
		}
	}
	switch {
	case h.Fresh > 0:
		h.Ready = 1
	case h.Hosts == 0:
		h.Reason = "no summary from any agent yet: every answer keeps Nova's order (NATS reachable? agents publishing summaries?)"
	default:
		h.Reason = fmt.Sprintf("none of the %d hosts' summaries is fresh (stale after %s): every answer keeps Nova's order", h.Hosts, s.weigh.StaleAfter)
	}
	return h
}

// health answers 200 while the service knows a fresh host, else 503
// with the reason: a load balancer then prefers a replica that knows
// the region, and monitoring sees an instance that can only fail open.
func (s *Service) health(w http.ResponseWriter, _ *http.Request) {
	h := s.Health()
	w.Header().Set("Content-Type", "application/json")
	if h.Ready == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(h)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
