package daemon

// The agent as a systemd service (etc/systemd/dvms-agent@.service):
// start-up that waits out NATS, Keystone and Nova outages instead of
// exiting, the readiness and status it reports over sd_notify, the
// watchdog fed while it waits, and the reload of its configuration on
// SIGHUP (systemctl reload).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/internal/backoff"
	"github.com/dvms-project/dvms/nova"
)

// ExitConfig is the exit code of an agent whose configuration, keys or
// credentials are wrong (sysexits' EX_CONFIG): restarting it cannot help,
// so the unit's RestartPreventExitStatus names it.
const ExitConfig = 78

// ErrConfig marks an error only the operator can mend (exit ExitConfig).
type ErrConfig struct{ err error }

func (e ErrConfig) Error() string { return e.err.Error() }
func (e ErrConfig) Unwrap() error { return e.err }

func ConfigError(err error) error {
	if err == nil {
		return nil
	}
	return ErrConfig{err}
}

// StartWait retries a step of the agent's start-up (authenticating to
// Keystone, reading the host from Nova) while it fails transiently, with
// capped exponential backoff and jitter, telling systemd what it waits for.
type StartWait struct {
	policy backoff.Policy
	// after is time.After outside tests.
	after func(time.Duration) <-chan time.Time
	// status reports the wait (systemd's STATUS=); nil = not reported.
	status func(string)
	log    zerolog.Logger
}

// defaultStartWait waits 1 s after the first failure, doubling up to 30 s.
func DefaultStartWait(log zerolog.Logger, status func(string)) *StartWait {
	return &StartWait{policy: backoff.Policy{Base: time.Second, Max: 30 * time.Second}, after: time.After, status: status, log: log}
}

// report tells systemd (STATUS=) what the agent is doing.
func (w *StartWait) report(s string) {
	if w.status != nil {
		w.status(s)
	}
}

// until calls try until it succeeds, ctx ends, or it fails with an error
// transient says is not (returned as it is). what names the wait
// ("Keystone (cloud x)").
func (w *StartWait) until(ctx context.Context, what string, try func(context.Context) error, transient func(error) bool) error {
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil || !transient(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stopped while waiting for %s: %w", what, err)
		}
		d := w.policy.Delay(attempt)
		w.report(fmt.Sprintf("waiting for %s: %v (attempt %d, next in %s)", what, err, attempt, d.Round(100*time.Millisecond)))
		w.log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", d).Msgf("start-up: waiting for %s", what)
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for %s: %w", what, err)
		case <-w.after(d):
		}
	}
}

// unavailable: Keystone's and Nova's transient failures (no answer, 5xx).
func unavailable(err error) bool { return errors.Is(err, nova.ErrUnavailable) }

// sdService is the agent's side of systemd's notify protocol: one
// STATUS line at a time (sent only when it changes), the watchdog fed
// while the agent starts or its runner runs.
type sdService struct {
	sd  notifier
	log zerolog.Logger

	mu     sync.Mutex
	status string

	agent atomic.Pointer[Proc] // nil while starting
}

func newSDService(sd notifier, log zerolog.Logger) *sdService {
	return &sdService{sd: sd, log: log}
}

// send sends state (and the current status line if state has none).
func (s *sdService) send(state string) {
	if err := s.sd.send(state); err != nil {
		s.log.Warn().Err(err).Msg("systemd notification not sent")
	}
}

// setStatus sends STATUS=text when it differs from the last one.
func (s *sdService) setStatus(text string) {
	s.mu.Lock()
	same := text == s.status
	s.status = text
	s.mu.Unlock()
	if !same {
		s.send("STATUS=" + text)
	}
}

// alive feeds the watchdog: a starting agent is healthy (it waits, with
// backoff); a started one while its runner runs.
func (s *sdService) alive() bool {
	if p := s.agent.Load(); p != nil {
		return p.running()
	}
	return true
}

// extendStart keeps systemd's start timeout (TimeoutStartSec, 90 s by
// default) from killing an agent that waits for NATS, Keystone or Nova:
// while it starts, every tick it asks for 3 more ticks
// (EXTEND_TIMEOUT_USEC), until it is ready or ctx ends. A process that
// stops (hangs) sends nothing and is killed at the end of the last
// extension, or by the watchdog.
func (s *sdService) extendStart(ctx context.Context, every time.Duration, tick <-chan time.Time) {
	for s.agent.Load() == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if s.agent.Load() == nil {
				s.send("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt((3*every).Microseconds(), 10))
			}
		}
	}
}

// ready sends READY=1 with the status line of p.
func (s *sdService) ready(p *Proc, host string) {
	s.agent.Store(p)
	_, text := readiness(host, p.tr.Connected(), p.meter)
	s.mu.Lock()
	s.status = text
	s.mu.Unlock()
	s.send("READY=1\nSTATUS=" + text)
}

// follow keeps STATUS= up to date (NATS connection, Nova's last answer)
// every tick until ctx ends.
func (s *sdService) follow(ctx context.Context, p *Proc, host string, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			_, text := readiness(host, p.tr.Connected(), p.meter)
			s.setStatus(text)
		}
	}
}

// readiness says whether a running agent can do its work: NATS connected
// and the last request to Nova, placement or Keystone answered (a 4xx
// is an answer; no answer or a 5xx is an outage). meter may be nil.
func readiness(host string, natsUp bool, meter *nova.Meter) (bool, string) {
	var why []string
	if !natsUp {
		why = append(why, "NATS disconnected, reconnecting")
	}
	if meter != nil {
		switch c := meter.LastClass(); c {
		case nova.ClassTransport, nova.ClassServerError:
			why = append(why, "Nova/Keystone not answering (last request: "+c+"), retrying")
		}
	}
	if len(why) > 0 {
		return false, "degraded: agent of " + host + ": " + strings.Join(why, "; ")
	}
	return true, "ready: agent of " + host + " running, NATS connected, Nova answering"
}

// Serve runs the agent cfg describes as a systemd service until ctx
// ends: it starts it (see Start), reports readiness, status and the
// watchdog over sd_notify, and reloads the configuration (reload reads
// it again) on each signal from hup.
func Serve(ctx context.Context, cfg Config, embedded bool, reload func() (Config, error), hup <-chan os.Signal, log zerolog.Logger) error {
	// systemd (Type=notify): the watchdog is fed from now on, while the
	// agent waits for NATS, Keystone or Nova (the start timeout extended
	// meanwhile), then while its runner runs; READY=1 once it runs.
	svc := newSDService(newNotifier(os.LookupEnv, os.Getpid()), log)
	sdCtx, stopSD := context.WithCancel(context.WithoutCancel(ctx))
	var sdWG sync.WaitGroup
	defer func() { stopSD(); sdWG.Wait() }()
	sdWG.Add(1)
	go func() {
		defer sdWG.Done()
		svc.sd.watch(sdCtx, svc.alive)
	}()
	sdWG.Add(1)
	go func() {
		defer sdWG.Done()
		const every = 10 * time.Second
		t := time.NewTicker(every)
		defer t.Stop()
		svc.extendStart(sdCtx, every, t.C)
	}()
	svc.setStatus("starting")
	a, err := Start(ctx, cfg, embedded, nil, log, DefaultStartWait(log, svc.setStatus))
	if err != nil {
		if ctx.Err() != nil { // SIGTERM while starting
			log.Info().Err(err).Msg("agent stopped while starting")
			return nil
		}
		return err
	}
	svc.ready(a, cfg.Agent.ID)
	sdWG.Add(2)
	go func() {
		defer sdWG.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		svc.follow(sdCtx, a, cfg.Agent.ID, t.C)
	}()
	go func() {
		defer sdWG.Done()
		select {
		case <-ctx.Done():
			svc.send("STOPPING=1\nSTATUS=stopping: finishing the plan being executed")
		case <-sdCtx.Done():
		}
	}()
	rl := &reloader{
		load:    reload,
		running: cfg, setLevel: zerolog.SetGlobalLevel, log: log, notify: svc.send,
		status: func() string { _, text := readiness(cfg.Agent.ID, a.tr.Connected(), a.meter); return text },
	}
	done := make(chan error, 1)
	go func() { done <- a.WaitClosed() }()
	for {
		select {
		case err := <-done:
			return err
		case <-hup:
			log.Info().Msg("SIGHUP: reloading the configuration")
			rl.reload()
		}
	}
}

// ---- reload (SIGHUP) ----

// reloader re-reads the configuration on SIGHUP and applies what can
// change at run time (options marked live in the table); the others are
// named in one log line as needing a restart. A configuration that does
// not load or validate is refused: the running one stays.
type reloader struct {
	load     func() (Config, error)
	running  Config
	setLevel func(zerolog.Level)
	log      zerolog.Logger
	// notify sends a notification to systemd.
	notify func(string)
	// status is the status line to restore after the reload.
	status func() string
}

// reloadResult is what one reload did.
type reloadResult struct {
	applied, restart []string // "[section] name" of the changed options
	err              error    // the refused configuration's problems
}

func (r *reloader) reload() reloadResult {
	r.notify("RELOADING=1\nSTATUS=reloading the configuration")
	defer func() { r.notify("READY=1\nSTATUS=" + r.status()) }()
	next, err := r.load()
	if err != nil {
		r.log.Error().Err(err).Msg("reload refused: the configuration does not validate; the running configuration stays")
		return reloadResult{err: err}
	}
	var res reloadResult
	for _, o := range changedOptions(r.running, next) {
		name := fmt.Sprintf("[%s] %s", o.section, o.name)
		if !o.live {
			res.restart = append(res.restart, name)
			continue
		}
		if err := o.apply(r, next); err != nil {
			r.log.Error().Err(err).Str("option", name).Msg("reload: option not applied")
			continue
		}
		res.applied = append(res.applied, name)
		// The running configuration takes the live option's new value.
		copyOption(o, &r.running, &next)
	}
	if len(res.applied) > 0 {
		// Logged whatever the new level (warn would hide an info line):
		// an operator's reload is always acknowledged.
		r.log.WithLevel(zerolog.NoLevel).Str(zerolog.LevelFieldName, "info").Strs("applied", res.applied).Msg("reload: configuration applied")
	}
	if len(res.restart) > 0 {
		r.log.Warn().Strs("options", res.restart).Msg("reload: these options changed in the configuration but need a restart to apply (systemctl restart); they keep their running values")
	}
	if len(res.applied) == 0 && len(res.restart) == 0 {
		r.log.Info().Msg("reload: the configuration has not changed")
	}
	return res
}

// apply makes a live option's new value effective.
func (o *Option) apply(r *reloader, next Config) error {
	switch {
	case o.section == "DEFAULT" && o.name == "log_level":
		lvl, err := ParseLevel(next.LogLevel)
		if err != nil {
			return err
		}
		r.setLevel(lvl)
		return nil
	}
	return fmt.Errorf("option marked live but nothing applies it")
}

// changedOptions are the options whose value differs between a and b
// (values compared, never logged: some hold secrets).
func changedOptions(a, b Config) []*Option {
	var out []*Option
	for i := range Options {
		o := &Options[i]
		if optionValue(o, &a) != optionValue(o, &b) {
			out = append(out, o)
		}
	}
	return out
}

// optionValue is o's value in c, comparable.
func optionValue(o *Option, c *Config) string {
	v := reflect.ValueOf(o.field(c)).Elem().Interface()
	if re, ok := v.(*regexp.Regexp); ok {
		if re == nil {
			return ""
		}
		return re.String()
	}
	return fmt.Sprint(v)
}

// copyOption sets o's field of dst to its value in src.
func copyOption(o *Option, dst, src *Config) {
	reflect.ValueOf(o.field(dst)).Elem().Set(reflect.ValueOf(o.field(src)).Elem())
}

// ParseLevel is a [DEFAULT] log_level (or --log-level) value as a level.
func ParseLevel(s string) (zerolog.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		return zerolog.ParseLevel(s)
	}
	return zerolog.InfoLevel, fmt.Errorf("[DEFAULT] log_level %q: want debug, info, warn or error", s)
}
