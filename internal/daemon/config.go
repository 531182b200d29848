package daemon

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/conf"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Config is the agent configuration: the options of the table
// (options.go) read from the INI file, DVMS_* environment variables and
// flags, on top of the packages' defaults for what is not an option.
type Config struct {
	LogLevel  string
	LogFormat string
	Site      string
	// MetricsListen is where /metrics and /healthz are served ("" = off).
	MetricsListen string

	// Message signing (bus/auth): the keys directory, the freshness
	// window, and the explicit opt-out.
	KeysDir       string
	MessageWindow time.Duration
	// ControlMaxAge: how long an operator's command counts after signing.
	ControlMaxAge    time.Duration
	InsecureUnsigned bool

	OSCloud        string
	CloudsYAML     string
	RequestTimeout time.Duration
	// ServerMetadataControls: dvms:pin / dvms:priority also from server
	// metadata (tenant-writable), not only from flavor extra specs.
	ServerMetadataControls bool

	NATSURL   string
	NATSCreds string
	// NATS nkey authentication: the agent's own key, or a seed file.
	NATSNkeyAuth bool
	NATSNkeySeed string
	TLSCA        string
	TLSCert      string
	TLSKey       string

	// Agent and Runtime carry the region (Runtime.Region), the host
	// (Agent.ID) and the scheduler and monitor options.
	Agent   scheduler.Config
	Runtime node.Config
	// Coord tunes the agent's Vivaldi coordinate (next_node vivaldi).
	Coord node.CoordConfig

	UnshelveEvery  time.Duration
	UnshelveMargin float64

	MonitorSource string
	FilePath      string
	CgroupRoot    string
	PromURL       string
	PromCPUQuery  string
	PromRAMQuery  string
	PromUUIDLabel string

	Arbiter       string
	Voters        int
	RaftBind      string
	RaftAdvertise string
	Heartbeat     time.Duration
	DeadAfter     time.Duration
	Membership    string
	SwimBind      string
	SwimAdvertise string
	SwimSeeds     string
	SwimKeyFile   string

	// Summary: the agent's host summaries for `dvms scheduler-api`;
	// SchedAPI, SchedAPIListen: that service (schedapi.go).
	Summary        node.SummaryConfig
	SchedAPI       extsched.Config
	SchedAPIHTTP   schedapi.Config
	SchedAPIListen string

	// Operator is the [operator] section: the operator commands' own
	// NATS identity (operator.go). The agent does not use it.
	Operator Operator
}

// Source says where option values come from. Each overrides the
// one before: the table's defaults, the file, the environment
// (DVMS_<SECTION>_<OPTION>, DVMS_<OPTION> for [DEFAULT]), the flags.
type Source struct {
	File  string                      // "" = none
	Dir   string                      // drop-in directory of *.conf overrides, "" = none
	Env   func(string) (string, bool) // os.LookupEnv outside tests
	Flags []FlagValue
}

// FlagValue is a flag set on the command line, naming its option.
type FlagValue struct {
	Option *Option
	Value  string
}

// setting is an option's value and where it came from.
type setting struct {
	raw, from string
}

// ErrNoCloud: neither --os-cloud, [nova] os_cloud nor OS_CLOUD names a cloud.
var ErrNoCloud = errors.New("no cloud named: set [nova] os_cloud, --os-cloud or OS_CLOUD")

// loadConfig reads the configuration of host's agent from src and
// returns it with every problem found, all in one pass: unknown sections
// and options of the file, bad values, and the rules between options.
func Load(src Source, host string) (Config, error) {
	if src.Env == nil {
		src.Env = func(string) (string, bool) { return "", false }
	}
	c, eff, errs, err := read(src, host, nil)
	if err != nil {
		return c, err
	}
	if c.OSCloud, err = ResolveCloud(c.OSCloud, src.Env); err != nil {
		errs = append(errs, err)
	}
	c.derive(func(section, name string) bool { _, ok := eff[LookupOption(section, name)]; return ok })
	errs = append(errs, c.validate())
	return c, errors.Join(errs...)
}

// read applies the table's defaults, then src, to a new configuration of
// host, the values of the options only accepts (all when nil); it
// returns the options set (and where) and every problem: unknown
// sections and options, bad values of the options taken. err is a file
// that could not be read.
func read(src Source, host string, only func(*Option) bool) (c Config, eff map[*Option]setting, errs []error, err error) {
	c = Config{Agent: scheduler.DefaultConfig(host), Runtime: node.DefaultConfig(), Coord: node.DefaultCoordConfig(),
		Summary: node.DefaultSummaryConfig(), SchedAPI: extsched.DefaultConfig(), SchedAPIHTTP: schedapi.DefaultConfig()}
	if src.Env == nil {
		src.Env = func(string) (string, bool) { return "", false }
	}
	for i := range Options { // then a bad value leaves its default
		if o := &Options[i]; o.set(&c, o.def) != nil {
			errs = append(errs, fmt.Errorf("[%s] %s: bad default %q in the option table", o.section, o.name, o.def))
		}
	}
	eff = map[*Option]setting{} // the values set, and where
	entries, err := conf.Read(src.File, src.Dir)
	if err != nil {
		return c, eff, nil, err
	}
	badSection := map[[2]string]bool{}
	for _, e := range entries {
		in := "" // a drop-in file is named
		if e.File != src.File {
			in = " (" + e.File + ")"
		}
		switch o := LookupOption(e.Section, e.Key); {
		case !slices.Contains(Sections, e.Section):
			if !badSection[[2]string{e.File, e.Section}] {
				badSection[[2]string{e.File, e.Section}] = true
				errs = append(errs, fmt.Errorf("[%s]%s: unknown section (sections: %s)", e.Section, in, strings.Join(Sections, ", ")))
			}
		case e.Key == "":
		case o == nil:
			errs = append(errs, fmt.Errorf("%w%s", unknownOption(e.Section, e.Key), in))
		default:
			eff[o] = setting{e.Value, fmt.Sprintf("[%s] %s%s", o.section, o.name, in)}
		}
	}
	for i := range Options {
		o := &Options[i]
		if v, ok := src.Env(o.EnvName()); ok {
			eff[o] = setting{strings.TrimSpace(v), fmt.Sprintf("%s ([%s] %s)", o.EnvName(), o.section, o.name)}
		}
	}
	for _, f := range src.Flags {
		eff[f.Option] = setting{f.Value, fmt.Sprintf("--%s ([%s] %s)", f.Option.flag, f.Option.section, f.Option.name)}
	}
	for i := range Options {
		o := &Options[i]
		if v, ok := eff[o]; ok && (only == nil || only(o)) {
			if err := o.set(&c, v.raw); err != nil {
				shown := v.raw
				if o.kind == kindNATSURLs {
					shown = bus.RedactURLs(shown) // a bad URL may still hold a password
				}
				errs = append(errs, fmt.Errorf("%s = %q: %w", v.from, shown, err))
			}
		}
	}
	return c, eff, errs, nil
}

// unknownOption names the key, and its section if it is in another one.
func unknownOption(section, key string) error {
	for _, s := range Sections {
		if LookupOption(s, key) != nil {
			return fmt.Errorf("[%s] %s: unknown option (it belongs in [%s])", section, key, s)
		}
	}
	return fmt.Errorf("[%s] %s: unknown option", section, key)
}

// resolveCloud returns the cloud to use, as doc/source/admin/configure.rst says: the one named
// (by --os-cloud or [nova] os_cloud), else $OS_CLOUD.
func ResolveCloud(named string, env func(string) (string, bool)) (string, error) {
	if named != "" {
		return named, nil
	}
	if v, ok := env("OS_CLOUD"); ok && v != "" {
		return v, nil
	}
	return "", ErrNoCloud
}

// derive sets the fields that follow from options: the summaries' site,
// the scheduler-api's staleness (3 summary intervals) and thresholds
// (the agents'), and no RTT probes over the bus under SWIM unless
// rtt_probe_interval is set (set reports whether an option was given, by
// file, environment or flag).
func (c *Config) derive(set func(section, name string) bool) {
	if c.Membership == "swim" && !set("scheduler", "rtt_probe_interval") {
		// memberlist's probes feed the coordinates (node.SwimConfig.Observe).
		c.Coord.Probe = 0
	}
	c.Summary.Site = c.Site
	if c.Summary.Interval > 0 {
		c.SchedAPI.StaleAfter = 3 * c.Summary.Interval
	}
	c.SchedAPI.CPUOverload, c.SchedAPI.RAMOverload = c.Agent.Thresholds.CPUOverload, c.Agent.Thresholds.RAMOverload
}

// validate checks the rules between options; each value alone was
// checked against its row.
func (c Config) validate() error {
	ac := c.Agent
	if ac.Distance == nil {
		// startAgent wires the coordinates' distances.
		ac.Distance = node.NewCoordTable().Distance(c.Coord.MaxError)
	}
	errs := []error{ac.Validate(), c.Runtime.Validate(), c.Coord.Validate(), c.BusConfig(c.NATSURL).Validate(), c.Summary.Validate(), c.SchedAPI.Validate(), c.SchedAPIHTTP.Validate()}
	switch {
	case c.MonitorSource == "file" && c.FilePath == "":
		errs = append(errs, errors.New("[monitor] source = file needs file_path"))
	case c.MonitorSource == "prometheus" && (c.PromURL == "" || c.PromCPUQuery == ""):
		errs = append(errs, errors.New("[monitor] source = prometheus needs prometheus_url and prometheus_cpu_query"))
	}
	if err := control.ValidateMaxAge(c.ControlMaxAge, c.MessageWindow); err != nil {
		errs = append(errs, fmt.Errorf("[DEFAULT] %w", err))
	}
	if c.NATSNkeyAuth && c.KeysDir == "" {
		errs = append(errs, errors.New("[nats] nkey_auth uses the agent's message key: set [DEFAULT] keys_dir"))
	}
	if c.Membership == "swim" {
		if _, err := c.swimSeeds(); err != nil {
			errs = append(errs, err)
		}
		if c.SwimKeyFile == "" && !c.InsecureUnsigned {
			errs = append(errs, errors.New("[consensus] membership = swim needs swim_key_file (or [DEFAULT] insecure_unsigned = true)"))
		}
	}
	if c.DeadAfter <= 2*c.Heartbeat {
		errs = append(errs, fmt.Errorf("[consensus] dead_after (%s) must exceed twice heartbeat_interval (%s)", c.DeadAfter, c.Heartbeat))
	}
	return errors.Join(errs...)
}

// swimSeeds parses [consensus] swim_seeds.
func (c Config) swimSeeds() ([]string, error) {
	var out []string
	for _, f := range strings.Split(c.SwimSeeds, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(f); err != nil || port == "" {
			return nil, fmt.Errorf("[consensus] swim_seeds: %q is not host:port", f)
		}
		out = append(out, f)
	}
	return out, nil
}

// BusConfig is the NATS connection of the agent, to url.
func (c Config) BusConfig(url string) bus.Config {
	bc := bus.DefaultConfig()
	bc.URL, bc.Name, bc.CredsFile = url, "dvms-agent-"+c.Agent.ID, c.NATSCreds
	// While NATS is down (at start-up too), retry after 0.5 s, doubling
	// up to 10 s, with jitter: back within 10 s of its return.
	bc.ReconnectWaitMax = 10 * time.Second
	// An agent (it has a host) speaks as its own key; a service without
	// a host (scheduler-api) with nkey_seed. One file serves both.
	switch {
	case c.NATSNkeyAuth && c.KeysDir != "" && c.Agent.ID != "":
		bc.NkeySeedFile = filepath.Join(c.KeysDir, c.Agent.ID+auth.SeedExt)
	case c.NATSNkeySeed != "":
		bc.NkeySeedFile = c.NATSNkeySeed
	}
	bc.TLSCA, bc.TLSCert, bc.TLSKey = c.TLSCA, c.TLSCert, c.TLSKey
	return bc
}
