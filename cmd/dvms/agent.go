package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/nova/demand/diagnostics"
	"github.com/dvms-project/dvms/nova/demand/file"
	"github.com/dvms-project/dvms/nova/demand/prometheus"
	"github.com/dvms-project/dvms/nova/openstack"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "agent",
		Usage: "run the sidecar agent of one compute host",
		Description: "Watches HOST's servers and nova-compute service, takes part in the\n" +
			"decentralized scheduling of its region over NATS and executes plans through the\n" +
			"Nova API. Configuration: --config (etc/dvms/dvms.conf.sample documents every\n" +
			"option), then DVMS_* environment variables, then these flags. SIGTERM or SIGINT\n" +
			"stops it gracefully: no new event or partition, a plan being executed is finished\n" +
			"(at most [scheduler] stop_grace).",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "host", EnvVars: []string{"DVMS_HOST"}, Usage: "compute host name as Nova knows it (default: this machine's host name)"},
			&cli.BoolFlag{Name: "embedded-nats", Usage: "run a NATS server in this process on [nats] url's address (one-host trials)"},
		}, configFlags()...), optionFlags()...),
		Action: runAgent,
	})
}

// optionFlags are the flags of the options that have one (options.go).
func optionFlags() []cli.Flag {
	var fs []cli.Flag
	for i := range options {
		if o := &options[i]; o.flag != "" {
			usage, _, _ := strings.Cut(o.help, ". ")
			fs = append(fs, &cli.StringFlag{Name: o.flag, Usage: fmt.Sprintf("%s (overrides [%s] %s)", strings.TrimSuffix(usage, "."), o.section, o.name)})
		}
	}
	return fs
}

// agentConfig loads the configuration for the agent of host with the
// flags applied, listing every problem.
func agentConfig(c *cli.Context) (fileConfig, error) {
	host := c.String("host")
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fileConfig{}, fmt.Errorf("--host not given and no host name: %w", err)
		}
		host = h
	}
	src := fileSource(c)
	for i := range options {
		if o := &options[i]; o.flag != "" && c.IsSet(o.flag) {
			src.flags = append(src.flags, flagValue{o, c.String(o.flag)})
		}
	}
	if lv, ok := logLevel(c); ok && !c.IsSet("log-level") { // dvms --log-level LEVEL agent
		src.flags = append(src.flags, flagValue{lookupOption("DEFAULT", "log_level"), lv})
	}
	cfg, err := loadConfig(src, host)
	if cfg.Arbiter == "local" && !c.Bool("embedded-nats") {
		err = errors.Join(err, errors.New("[consensus] arbiter = local lets every agent decide merges alone: only for a single agent with --embedded-nats; use raft"))
	}
	return cfg, errors.Join(err, checkTrust(cfg))
}

func runAgent(c *cli.Context) error {
	cfg, err := agentConfig(c)
	if err != nil {
		return configError(fmt.Errorf("agent configuration:\n%w", err))
	}
	// The level is the process's global one, so that a reload (SIGHUP)
	// changes it for every logger derived from this one.
	lvl, _ := parseLevel(cfg.LogLevel)
	zerolog.SetGlobalLevel(lvl)
	log := newLogger("debug", cfg.LogFormat).With().Str("agent", cfg.Agent.ID).Logger()
	warnReadable(log, c.String("config"), "the configuration file")
	warnReadable(log, cloudsFile(cfg.CloudsYAML), "clouds.yaml")
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// SIGHUP reloads, also one that comes while the agent starts (handled
	// once it runs): it must never kill the agent.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

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
	a, err := startAgent(ctx, cfg, c.Bool("embedded-nats"), nil, log, defaultStartWait(log, svc.setStatus))
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
		load:    func() (fileConfig, error) { return agentConfig(c) },
		running: cfg, setLevel: zerolog.SetGlobalLevel, log: log, notify: svc.send,
		status: func() string { _, text := readiness(cfg.Agent.ID, a.tr.Connected(), a.meter); return text },
	}
	done := make(chan error, 1)
	go func() { done <- a.wait() }()
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

// members is what an agent needs of its membership: heartbeats over NATS
// (node.Membership) or SWIM (node.Swim), by [consensus] membership.
type members interface {
	Members() []node.Member
	Run(ctx context.Context) error
}

// swimConfig is the agent's SWIM membership from its configuration: the
// region key read from swim_key_file, bind, advertise (derived as Raft's
// when empty, see advertiseAddr) and seed addresses. viv, if not nil, is
// the agent's coordinate: it rides in the metadata and in every probe ack,
// and, unless the agent probes RTTs over NATS ([scheduler]
// rtt_probe_interval > 0), each direct probe's RTT is one of its samples:
// one source of samples, never two paths mixed.
func swimConfig(cfg fileConfig, natsURL string, self node.Heartbeat, coords *node.CoordTable, viv *node.Vivaldi) (node.SwimConfig, error) {
	sc := node.SwimConfig{Self: self, Coords: coords}
	if viv != nil {
		sc.SelfCoord = viv.Coordinate
		if cfg.Coord.Probe == 0 {
			sc.Observe = viv.Observe
		}
	}
	var err error
	if sc.Seeds, err = cfg.swimSeeds(); err != nil {
		return sc, err
	}
	if sc.BindAddr, sc.BindPort, err = parseHostPort(cfg.SwimBind); err != nil {
		return sc, fmt.Errorf("[consensus] swim_bind: %w", err)
	}
	adv, err := advertiseAddr(cfg.SwimBind, cfg.SwimAdvertise, natsURL)
	if err != nil {
		return sc, fmt.Errorf("[consensus] swim_advertise: %w", err)
	}
	if adv != "" {
		if sc.AdvertiseAddr, sc.AdvertisePort, err = parseHostPort(adv); err != nil {
			return sc, fmt.Errorf("[consensus] swim_advertise: %w", err)
		}
	}
	if cfg.SwimKeyFile != "" {
		raw, err := os.ReadFile(cfg.SwimKeyFile)
		if err != nil {
			return sc, fmt.Errorf("[consensus] swim_key_file: %w", err)
		}
		if sc.Key, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw))); err != nil {
			return sc, fmt.Errorf("[consensus] swim_key_file %s: not base64: %w", cfg.SwimKeyFile, err)
		}
	}
	return sc, sc.Validate()
}

// agentProc is a running agent: its runner, membership, arbiter and the
// connections they share. Stop order matters: the runner first (it may
// still need the arbiter and the bus to end its partition), then the
// goodbye heartbeat, then the arbiter, then the connections.
type agentProc struct {
	log      zerolog.Logger
	runner   *node.Runner
	member   members
	arbiter  agentArbiter
	reviver  reviver
	tr       *bus.NATS
	signed   *auth.Transport // nil when unsigned
	embedded *bus.Embedded
	journal  *journal
	meter    *nova.Meter // requests to Nova, placement, Keystone (nil in some tests)
	controls *controls   // the operators' run-time controls
	metrics  *agentMetrics
	demand   nova.DemandSource
	httpSrv  *metricsServer // /metrics and /healthz, nil when off
	stopping atomic.Bool    // ctx ended: the runner is retiring
	running  atomic.Bool    // the runner's Run has not returned
	started  time.Time

	runDone  chan error
	stopRest context.CancelFunc
	wg       sync.WaitGroup
}

func newIncarnation() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(b)
}

// novaDeps are the agent's Nova client, the meter of its requests and its
// demand source; startAgent builds them from the configuration when
// given none (tests give nova/fake's).
type novaDeps struct {
	client nova.Client
	meter  *nova.Meter
	demand nova.DemandSource
}

// startAgent wires and starts every part; the runner stops when ctx ends.
// It waits (sw, nil for defaultStartWait) for NATS, Keystone and Nova
// while they do not answer; errors of the configuration, keys or
// credentials are errConfig.
func startAgent(ctx context.Context, cfg fileConfig, embedded bool, nd *novaDeps, log zerolog.Logger, sw *startWait) (*agentProc, error) {
	if sw == nil {
		sw = defaultStartWait(log, nil)
	}
	p := &agentProc{log: log, runDone: make(chan error, 1), started: time.Now()}
	host := cfg.Agent.ID
	cfg.Agent.Incarnation = newIncarnation()
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()

	natsURL := cfg.NATSURL
	if embedded {
		ec, err := embeddedConfig(natsURL)
		if err != nil {
			return nil, err
		}
		if p.embedded, err = bus.StartEmbedded(ec); err != nil {
			return nil, fmt.Errorf("embedded NATS on %s: %w", bus.RedactURLs(natsURL), err)
		}
		natsURL = p.embedded.ClientURL()
		log.Info().Str("url", natsURL).Msg("embedded NATS server started")
	}
	bc := cfg.busConfig(natsURL)
	// No server at start-up is an outage like a later one: the
	// connection keeps trying in the background (capped backoff).
	bc.RetryOnFailedConnect = true
	bc.OnStateChange = func(event string, err error) {
		log.Warn().Err(err).Str("nats", event).Msg("NATS connection state changed")
	}
	tr, err := bus.ConnectNATS(ctx, bc)
	if err != nil {
		return nil, configError(fmt.Errorf("connect NATS: %w", err))
	}
	p.tr = tr
	// bt signs and verifies (keys_dir); the status service stays on the
	// plain connection: `dvms status` has no key.
	bt, signed, err := signedBus(cfg, tr, log)
	if err != nil {
		return nil, configError(err)
	}
	p.signed = signed
	if !tr.Connected() {
		where := bus.RedactURLs(natsURL)
		sw.report("waiting for NATS at " + where)
		log.Warn().Str("url", where).Msg("start-up: waiting for NATS (retrying with backoff)")
		if err := tr.WaitConnected(ctx); err != nil {
			return nil, fmt.Errorf("stopped while waiting for NATS at %s: %w", where, err)
		}
		log.Info().Str("url", where).Msg("start-up: NATS connected")
	}

	if nd == nil {
		oc := openstack.DefaultConfig(cfg.OSCloud)
		oc.CloudsFile, oc.RequestTimeout = cfg.CloudsYAML, cfg.RequestTimeout
		oc.ServerMetadataControls = cfg.ServerMetadataControls
		var cl *openstack.Client
		err := sw.until(ctx, fmt.Sprintf("Keystone (cloud %s)", cfg.OSCloud), func(ctx context.Context) (err error) {
			cl, err = openstack.New(ctx, oc)
			return err
		}, unavailable)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// clouds.yaml, the cloud's name, the credentials (401): the
			// operator's to mend.
			return nil, configError(fmt.Errorf("nova: %w", err))
		}
		src, err := demandSource(cfg, cl)
		if err != nil {
			return nil, configError(err)
		}
		nd = &novaDeps{client: cl, meter: cl.Meter(), demand: src}
	}
	nc, src := nd.client, nd.demand
	p.demand = src
	p.meter = nd.meter
	err = sw.until(ctx, "Nova", func(ctx context.Context) error { _, err := nc.Host(ctx, host); return err }, unavailable)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("nova has no usable compute host %q (is --host the name `openstack compute service list` shows?): %w", host, err)
	}
	sw.report("starting: NATS connected, Nova answered")

	arb, err := newArbiter(cfg, bt, natsURL, log)
	if err != nil {
		return nil, err
	}
	p.arbiter = arb

	// The region's maintenance watch runs in the live member with the
	// smallest host name (membership is set below, before Run).
	watcher := func() bool {
		ms := p.member.Members()
		return len(ms) > 0 && ms[0].Host == host
	}
	// Operators' view: the journal behind `dvms status` / `dvms events`
	// and the Prometheus metrics, both fed by the runner's hooks.
	p.journal = newJournal(host, time.Now)
	// `dvms events --follow` listens on the plain connection, as status.
	p.journal.onUpdate = func(u followUpdate) {
		if data, err := json.Marshal(u); err == nil {
			_ = tr.Publish(context.Background(), bus.EventsSubject(cfg.Runtime.Region), data)
		}
	}
	// The operators' run-time controls (control.go).
	p.controls = newControls(cfg.Runtime.Exec.DryRun)
	p.metrics = newAgentMetrics(metricsSources{
		host: host, meter: nd.meter,
		advise:    func() bool { return p.controls.Advise(host) },
		paused:    p.controls.Paused,
		excluded:  func() bool { return p.controls.Excluded(host) },
		dropped:   func() int64 { return p.runner.Dropped() },
		members:   func() int { return len(p.member.Members()) },
		watch:     watcher,
		partition: func() *scheduler.Partition { return p.runner.Partition() },
		arbiter:   func() *arbiterInfo { return arbiterStatus(arb) },
		coverage:  p.coverage,
	})
	// Vivaldi coordinates (DESIGN §5.3): RTT probes over the signed bus,
	// members' coordinates from their heartbeats.
	coords := node.NewCoordTable()
	viv, err := node.NewVivaldi(cfg.Coord, cfg.Runtime.Region, host, bt, node.Wall{}, coords, time.Now().UnixNano(), log)
	if err != nil {
		return nil, err
	}
	cfg.Agent.Distance = coords.Distance(cfg.Coord.MaxError)
	// nova/openstack retries failed reads itself: one retry layer.
	cfg.Runtime.Exec.Retries = 0
	p.runner, err = node.New(cfg.Runtime, cfg.Agent, []string{host}, node.Deps{
		Bus: bt, Nova: nc, Demand: src, Arbiter: arb, Clock: node.Wall{}, Log: log,
		Seed: time.Now().UnixNano(), Watcher: watcher, Hooks: observeHooks(p.metrics, p.journal, time.Now),
		Controls: p.controls,
	})
	if err != nil {
		return nil, err
	}
	self := node.Heartbeat{Host: host, Site: cfg.Site, Version: version, Incarnation: cfg.Agent.Incarnation, Raft: arb.RaftAddr()}
	peers := func() {
		var ps []consensus.Peer
		for _, m := range p.member.Members() {
			ps = append(ps, consensus.Peer{ID: m.Host, Site: m.Site, RaftAddr: m.Raft})
		}
		arb.SetPeers(ps)
	}
	up := func(h string) { p.runner.MemberUp(h); viv.PeerUp(h); peers() }
	down := func(h string) { p.runner.MemberDown(h); viv.PeerDown(h); peers() }
	if cfg.Membership == "swim" {
		sc, err := swimConfig(cfg, natsURL, self, coords, viv)
		if err != nil {
			return nil, err
		}
		sw, err := node.NewSwim(sc, log.With().Str("component", "swim").Logger())
		if err != nil {
			return nil, err
		}
		sw.OnUp, sw.OnDown = up, down
		p.member = sw
		ev := log.Info().Str("bind", cfg.SwimBind)
		if sc.AdvertiseAddr != "" {
			ev = ev.Str("advertise", net.JoinHostPort(sc.AdvertiseAddr, strconv.Itoa(sc.AdvertisePort)))
		}
		ev.Strs("seeds", sc.Seeds).Bool("encrypted", len(sc.Key) > 0).Bool("bus_rtt_probes", cfg.Coord.Probe > 0).Msg("membership: swim")
	} else {
		mc := node.MembershipConfig{Region: cfg.Runtime.Region, Interval: cfg.Heartbeat, DeadAfter: cfg.DeadAfter, Self: self}
		m, err := node.NewMembership(mc, bt, node.Wall{}, log)
		if err != nil {
			return nil, err
		}
		m.Coords, m.SelfCoord = coords, viv.Coordinate
		m.OnUp, m.OnDown = up, down
		p.member = m
	}
	peers()

	if p.reviver, err = newReviver(cfg, nc, src, p.runner.LastSample, log); err != nil {
		return nil, err
	}

	if cfg.MetricsListen != "" {
		// Metrics are not worth stopping the scheduling for (several
		// agents on one test host share the default port): logged.
		if p.httpSrv, err = startMetricsServer(cfg.MetricsListen, p.metrics.reg, p.healthy); err != nil {
			log.Error().Err(err).Str("listen", cfg.MetricsListen).Msg("no /metrics nor /healthz: [DEFAULT] metrics_listen unusable")
		} else {
			log.Info().Str("listen", p.httpSrv.Addr()).Msg("serving /metrics and /healthz")
		}
	}

	// Arbiter, membership and reviver outlive the runner's ctx: they stop
	// after it (see agentProc).
	rest, stopRest := context.WithCancel(context.WithoutCancel(ctx))
	p.stopRest = stopRest
	p.goRun(func() error { return arb.Run(rest) }, "merge arbiter")
	memberCtx, stopMember := context.WithCancel(rest)
	p.goRun(func() error { return p.member.Run(memberCtx) }, "membership")
	p.goRun(func() error { return viv.Run(memberCtx) }, "coordinates")
	if p.reviver != nil {
		p.goRun(func() error {
			return p.reviver.Run(ctx, bt, func() bool { return p.runner.Partition() != nil })
		}, "unshelve")
	}
	p.goRun(func() error { return p.runner.PublishSummaries(ctx, cfg.Summary) }, "host summaries")
	status := &statusService{region: cfg.Runtime.Region, tr: tr, log: log, report: func(req statusRequest) agentReport {
		return p.report(cfg, req)
	}}
	p.goRun(func() error { return status.run(rest) }, "status service")
	ctlSvc := &controlService{region: cfg.Runtime.Region, host: host, tr: tr, secure: cfg.KeysDir != "", window: cfg.MessageWindow,
		ring: operatorKeys(cfg, log), ctl: p.controls, watch: watcher, log: log, dlog: log.Sample(&zerolog.BurstSampler{Burst: 10, Period: 10 * time.Second}),
		now: time.Now, rng: mrand.New(mrand.NewSource(time.Now().UnixNano())),
		members: func() []string {
			var hs []string
			for _, m := range p.member.Members() {
				hs = append(hs, m.Host)
			}
			return hs
		},
		apply: func() { p.runner.Control(p.controls.Paused(), p.controls.Excluded(host)) },
	}
	p.goRun(func() error { return ctlSvc.run(rest) }, "operator controls")
	p.running.Store(true)
	go func() {
		err := p.runner.Run(ctx)
		p.running.Store(false)
		stopMember() // goodbye heartbeat once the partition role is handed back
		p.runDone <- err
	}()
	go func() {
		<-ctx.Done()
		p.stopping.Store(true)
	}()
	log.Info().Str("version", version).Str("incarnation", cfg.Agent.Incarnation).Str("nats", bus.RedactURLs(natsURL)).Bool("signed", signed != nil).
		Str("raft", arb.RaftAddr()).Str("demand", cfg.MonitorSource).Bool("advise_only", cfg.Runtime.Exec.DryRun).
		Msg("agent started")
	ok = true
	return p, nil
}

func (p *agentProc) goRun(f func() error, what string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := f(); err != nil {
			p.log.Error().Err(err).Str("part", what).Msg("stopped with an error")
		}
	}()
}

// wait returns when the runner has stopped (ctx ended), after the other
// parts stopped too.
func (p *agentProc) wait() error {
	err := <-p.runDone
	p.close()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	p.log.Info().Msg("agent stopped")
	return nil
}

func (p *agentProc) close() {
	if p.httpSrv != nil {
		p.httpSrv.Close()
	}
	if p.stopRest != nil {
		p.stopRest()
	}
	p.wg.Wait()
	if p.tr != nil {
		_ = p.tr.Close()
	}
	if p.embedded != nil {
		p.embedded.Shutdown()
	}
}

// healthy is /healthz: the runner runs and NATS is connected.
func (p *agentProc) healthy() error {
	switch {
	case !p.running.Load():
		return errors.New("agent: runner stopped")
	case p.stopping.Load():
		return errors.New("agent: stopping")
	case !p.tr.Connected():
		return errors.New("agent: NATS disconnected")
	}
	return nil
}

// report is this agent's answer to a status request.
func (p *agentProc) report(cfg fileConfig, req statusRequest) agentReport {
	part := p.runner.Partition()
	host := cfg.Agent.ID
	ms := p.member.Members()
	return agentReport{
		V: 1, Host: host, Site: cfg.Site, Version: version, Incarnation: cfg.Agent.Incarnation,
		Started: p.started, Now: time.Now(), State: agentState(host, part, p.stopping.Load()),
		Advise: p.controls.Advise(host), Excluded: p.controls.Excluded(host), Control: p.controls.view(),
		Watch:     len(ms) > 0 && ms[0].Host == host,
		Partition: partInfo(part), Members: membersInfo(ms), Arbiter: arbiterStatus(p.arbiter),
		Demand: p.demandInfo(cfg.MonitorSource),
		Events: filterEvents(p.journal.snapshot(), req.Since, req.MaxEvents),
	}
}

// coverage is the demand source's coverage, ok false when it does not say.
func (p *agentProc) coverage() (cgroup.Coverage, bool) {
	cs, ok := p.demand.(coverageSource)
	if !ok {
		return cgroup.Coverage{}, false
	}
	return cs.Coverage(), true
}

// coverageSource is a demand source that says what it sees of its host
// (the cgroup source).
type coverageSource interface{ Coverage() cgroup.Coverage }

// demandInfo is the demand source's coverage for `dvms status` (nil when
// the source does not say).
func (p *agentProc) demandInfo(source string) *demandInfo {
	cs, ok := p.demand.(coverageSource)
	if !ok {
		return nil
	}
	return &demandInfo{Source: source, Coverage: cs.Coverage()}
}

// embeddedConfig turns [nats] url into the address an embedded server
// listens on.
func embeddedConfig(raw string) (bus.EmbeddedConfig, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return bus.EmbeddedConfig{}, fmt.Errorf("--embedded-nats: [nats] url %q: want nats://HOST:PORT", raw)
	}
	port := 4222
	if s := u.Port(); s != "" {
		if port, err = strconv.Atoi(s); err != nil {
			return bus.EmbeddedConfig{}, fmt.Errorf("--embedded-nats: [nats] url %q: bad port", raw)
		}
	}
	return bus.EmbeddedConfig{Host: u.Hostname(), Port: port}, nil
}

// demandSource builds the configured metrics source.
func demandSource(cfg fileConfig, nc *openstack.Client) (nova.DemandSource, error) {
	var src nova.DemandSource
	var err error
	switch cfg.MonitorSource {
	case "file":
		src, err = file.New(file.DefaultConfig(cfg.FilePath))
	case "cgroup":
		cc := cgroup.DefaultConfig()
		cc.Root, cc.Host = cfg.CgroupRoot, cfg.Agent.ID
		src, err = cgroup.New(cc)
	case "nova-diagnostics":
		src, err = diagnostics.New(diagnostics.DefaultConfig(), nc)
	case "prometheus":
		pc := prometheus.DefaultConfig()
		pc.URL, pc.CPUQuery, pc.RAMQuery, pc.UUIDLabel = cfg.PromURL, cfg.PromCPUQuery, cfg.PromRAMQuery, cfg.PromUUIDLabel
		src, err = prometheus.New(pc)
	default:
		err = fmt.Errorf("unknown source %q", cfg.MonitorSource)
	}
	if err != nil {
		return nil, fmt.Errorf("[monitor] source %s: %w", cfg.MonitorSource, err)
	}
	return src, nil
}
