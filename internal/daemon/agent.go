package daemon

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/nova/demand/diagnostics"
	"github.com/dvms-project/dvms/nova/demand/file"
	"github.com/dvms-project/dvms/nova/demand/prometheus"
	"github.com/dvms-project/dvms/nova/openstack"
	"github.com/dvms-project/dvms/scheduler/agentd"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/rs/zerolog"
)

// Version is the build's version the agent reports (status,
// dvms_build_info); the command sets it from its own.
var Version = "dev"

// swimConfig is the agent's SWIM membership from its configuration: the
// region key read from swim_key_file, bind, advertise (derived as Raft's
// when empty, see advertiseAddr) and seed addresses. viv, if not nil, is
// the agent's coordinate: it rides in the metadata and in every probe ack,
// and, unless the agent probes RTTs over NATS ([scheduler]
// rtt_probe_interval > 0), each direct probe's RTT is one of its samples:
// one source of samples, never two paths mixed.
func swimConfig(cfg Config, natsURL string, self node.Heartbeat, coords *node.CoordTable, viv *node.Vivaldi) (node.SwimConfig, error) {
	sc := node.SwimConfig{Self: self, Coords: coords}
	if viv != nil {
		sc.SelfCoord = viv.Coordinate
		if cfg.Coord.Probe == 0 {
			sc.Observe = viv.Observe
		}
	}
	var err error
	if sc.Signer, sc.Keyring, err = swimKeys(cfg); err != nil {
		return sc, err
	}
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

// Proc is a running `dvms agent`: the agent (scheduler/agentd) and
// the connections this command made for it, closed after it stopped.
type Proc struct {
	*agentd.Agent
	log      zerolog.Logger
	tr       *bus.NATS
	embedded *bus.Embedded
	meter    *nova.Meter // requests to Nova, placement, Keystone (nil in some tests)
	// running: the agent's runner runs (the systemd watchdog's test).
	running func() bool
}

// NovaDeps are the agent's Nova client, the meter of its requests and its
// demand source; startAgent builds them from the configuration when
// given none (tests give nova/fake's).
type NovaDeps struct {
	Client nova.Client
	Meter  *nova.Meter
	Demand nova.DemandSource
}

// startAgent connects, builds the agent's options from cfg and starts
// it; the runner stops when ctx ends. It waits (sw, nil for
// defaultStartWait) for NATS, Keystone and Nova while they do not
// answer; errors of the configuration, keys or credentials are
// ErrConfig.
func Start(ctx context.Context, cfg Config, embedded bool, nd *NovaDeps, log zerolog.Logger, sw *StartWait) (*Proc, error) {
	if sw == nil {
		sw = DefaultStartWait(log, nil)
	}
	p := &Proc{log: log}
	host := cfg.Agent.ID
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
	bc := cfg.BusConfig(natsURL)
	// No server at start-up is an outage like a later one: the
	// connection keeps trying in the background (capped backoff).
	bc.RetryOnFailedConnect = true
	bc.OnStateChange = func(event string, err error) {
		log.Warn().Err(err).Str("nats", event).Msg("NATS connection state changed")
	}
	tr, err := bus.ConnectNATS(ctx, bc)
	if err != nil {
		return nil, ConfigError(fmt.Errorf("connect NATS: %w", err))
	}
	p.tr = tr
	// bt signs and verifies (keys_dir); the status service stays on the
	// plain connection: `dvms status` has no key.
	bt, signed, err := signedBus(cfg, tr, log)
	if err != nil {
		return nil, ConfigError(err)
	}
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
			return nil, ConfigError(fmt.Errorf("nova: %w", err))
		}
		src, err := demandSource(cfg, cl)
		if err != nil {
			return nil, ConfigError(err)
		}
		nd = &NovaDeps{Client: cl, Meter: cl.Meter(), Demand: src}
	}
	p.meter = nd.Meter
	err = sw.until(ctx, "Nova", func(ctx context.Context) error { _, err := nd.Client.Host(ctx, host); return err }, unavailable)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("nova has no usable compute host %q (is --host the name `openstack compute service list` shows?): %w", host, err)
	}
	sw.report("starting: NATS connected, Nova answered")

	o, err := agentOptions(cfg, natsURL, tr, bt, nd, log)
	if err != nil {
		return nil, err
	}
	if p.Agent, err = agentd.New(o); err != nil {
		return nil, err
	}
	p.running = p.Running
	p.Start(ctx)
	log.Info().Str("version", Version).Str("incarnation", p.Incarnation()).Str("nats", bus.RedactURLs(natsURL)).Bool("signed", signed != nil).
		Str("raft", o.Arbiter.RaftAddr()).Str("demand", cfg.MonitorSource).Bool("advise_only", cfg.Runtime.Exec.DryRun).
		Msg("agent started")
	ok = true
	return p, nil
}

// agentOptions are the options of the agent cfg describes, over the
// plain connection tr and the signing one bt.
func agentOptions(cfg Config, natsURL string, tr, bt bus.Transport, nd *NovaDeps, log zerolog.Logger) (agentd.Options, error) {
	arb, err := newArbiter(cfg, bt, natsURL, log)
	if err != nil {
		return agentd.Options{}, err
	}
	// Vivaldi coordinates (DESIGN §5.3): RTT probes over the signed bus,
	// members' coordinates from their heartbeats.
	coords := node.NewCoordTable()
	cfg.Agent.Distance = coords.Distance(cfg.Coord.MaxError)
	// nova/openstack retries failed reads itself: one retry layer.
	cfg.Runtime.Exec.Retries = 0
	cfg.Runtime.StateDir = stateDir(cfg.Runtime.StateDir, log)
	summary := cfg.Summary
	return agentd.Options{
		Runtime: cfg.Runtime, Agent: cfg.Agent, Site: cfg.Site, Version: Version,
		Bus: tr, Signed: bt, Nova: nd.Client, Meter: nd.Meter, Demand: nd.Demand, DemandName: cfg.MonitorSource,
		Arbiter: arb, Clock: node.Wall{}, Log: log, Seed: time.Now().UnixNano(),
		Membership: func(m agentd.Membership) (agentd.Members, error) { return membership(cfg, natsURL, m) },
		Coords:     &agentd.Coords{Config: cfg.Coord, Table: coords},
		Secure:     cfg.KeysDir != "", OperatorKeys: operatorKeys(cfg, log), Window: cfg.MessageWindow, ControlMaxAge: cfg.ControlMaxAge,
		Summary: &summary, Reviver: reviverConfig(cfg), MetricsListen: cfg.MetricsListen,
	}, nil
}

// membership is [consensus] membership: swim, or heartbeats over NATS.
func membership(cfg Config, natsURL string, m agentd.Membership) (agentd.Members, error) {
	if cfg.Membership == "swim" {
		sc, err := swimConfig(cfg, natsURL, m.Self, m.Coords, m.Vivaldi)
		if err != nil {
			return nil, err
		}
		sw, err := node.NewSwim(sc, m.Log.With().Str("component", "swim").Logger())
		if err != nil {
			return nil, err
		}
		sw.OnUp, sw.OnDown = m.Up, m.Down
		ev := m.Log.Info().Str("bind", cfg.SwimBind)
		if sc.AdvertiseAddr != "" {
			ev = ev.Str("advertise", net.JoinHostPort(sc.AdvertiseAddr, strconv.Itoa(sc.AdvertisePort)))
		}
		ev.Strs("seeds", sc.Seeds).Bool("encrypted", len(sc.Key) > 0).Bool("bus_rtt_probes", cfg.Coord.Probe > 0).Msg("membership: swim")
		return sw, nil
	}
	mc := node.MembershipConfig{Region: cfg.Runtime.Region, Interval: cfg.Heartbeat, DeadAfter: cfg.DeadAfter, Self: m.Self}
	hb, err := node.NewMembership(mc, m.Signed, m.Clock, m.Log)
	if err != nil {
		return nil, err
	}
	hb.Coords, hb.SelfCoord = m.Coords, m.Vivaldi.Coordinate
	hb.OnUp, hb.OnDown = m.Up, m.Down
	return hb, nil
}

// WaitClosed returns when the agent has stopped (ctx ended), its connections
// closed.
func (p *Proc) WaitClosed() error {
	err := p.Wait()
	p.close()
	if err != nil {
		return err
	}
	p.log.Info().Msg("agent stopped")
	return nil
}

// close closes the connections startAgent made (the agent stopped).
func (p *Proc) close() {
	if p.tr != nil {
		_ = p.tr.Close()
	}
	if p.embedded != nil {
		p.embedded.Shutdown()
	}
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
func demandSource(cfg Config, nc *openstack.Client) (nova.DemandSource, error) {
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

// stateDir is where the agent keeps its grants: [DEFAULT] state_dir,
// else systemd's $STATE_DIRECTORY (its first entry), else none (logged).
func stateDir(dir string, log zerolog.Logger) string {
	if dir == "" {
		dir, _, _ = strings.Cut(os.Getenv("STATE_DIRECTORY"), ":")
	}
	if dir == "" {
		log.Warn().Msg("no state_dir: the grants this agent gives are kept in memory only; restarted mid-plan, it does not wait for the moves it granted")
	}
	return dir
}
