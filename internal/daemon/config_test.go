package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/internal/conf"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
	"github.com/dvms-project/dvms/scheduler/node"
)

const samplePath = "../../etc/dvms/dvms.conf.sample"

// fakeEnv is an environment of the KEY=VALUE pairs kv.
var fakeEnv = conf.MapEnv

// load loads text as the configuration file ("" = no file) in the
// environment kv.
func load(t *testing.T, text string, kv ...string) (Config, error) {
	t.Helper()
	src := Source{Env: fakeEnv(kv...)}
	if text != "" {
		src.File = filepath.Join(t.TempDir(), "dvms.conf")
		if err := os.WriteFile(src.File, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(src, "compute-1")
}

// comparable returns c with its regexp replaced by its text, so configs
// compare with reflect.DeepEqual.
func comparable(c Config) (Config, string) {
	re := ""
	if c.Runtime.DrainReason != nil {
		re = c.Runtime.DrainReason.String()
	}
	c.Runtime.DrainReason = nil
	return c, re
}

func sameConfig(t *testing.T, what string, got, want Config) {
	t.Helper()
	g, gre := comparable(got)
	w, wre := comparable(want)
	if !reflect.DeepEqual(g, w) || gre != wre {
		t.Errorf("%s:\n got %+v %q\nwant %+v %q", what, g, gre, w, wre)
	}
}

// The defaults the sample documents (its commented-out options) are the
// loader's: uncommented, they load to the configuration of an empty file.
func TestSampleDefaultsAreTheLoadersDefaults(t *testing.T) {
	text, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	option := regexp.MustCompile(`^#([a-z_]+) =(?: (.*))?$`)
	var uncommented strings.Builder
	documented := 0
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "[") {
			uncommented.WriteString(line + "\n")
		} else if m := option.FindStringSubmatch(line); m != nil {
			fmt.Fprintf(&uncommented, "%s = %s\n", m[1], m[2])
			documented++
		}
	}
	if documented != len(Options) {
		t.Errorf("the sample documents %d options, the table has %d", documented, len(Options))
	}
	fromSample, err := load(t, uncommented.String(), "OS_CLOUD=c")
	if err != nil {
		t.Fatalf("the sample's defaults do not load: %v", err)
	}
	defaults, err := load(t, "", "OS_CLOUD=c")
	if err != nil {
		t.Fatalf("the defaults do not load: %v", err)
	}
	sameConfig(t, "the sample's defaults", fromSample, defaults)
}

// The table's defaults are the packages' (the simulator uses those), so
// an agent and a simulated agent behave alike.
func TestTableDefaultsArePackageDefaults(t *testing.T) {
	c, err := load(t, "", "OS_CLOUD=c")
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.Agent, want.Runtime, want.Coord = scheduler.DefaultConfig("compute-1"), node.DefaultConfig(), node.DefaultCoordConfig()
	want.Summary, want.SchedAPI, want.SchedAPIHTTP = node.DefaultSummaryConfig(), extsched.DefaultConfig(), schedapi.DefaultConfig()
	sameConfig(t, "defaults", c, want)
}

// notOptions are the fields of Config that no row binds, and why.
var notOptions = map[string]string{
	"Agent.ID":                   "the --host flag",
	"Agent.Incarnation":          "drawn at each start",
	"Agent.Distance":             "the agent's Vivaldi coordinates (scheduler/node/coords.go), wired by the agent",
	"Agent.Lease":                "internal: the arbiter registration's lease, renewed by the leader",
	"Runtime.Tick":               "internal: the agent's timer resolution",
	"Runtime.Inbox":              "internal: message buffer",
	"Runtime.Exec.ReadTimeout":   "the Nova client's request_timeout bounds the reads of a real cloud",
	"Runtime.Exec.Retries":       "the agent sets 0: nova/openstack retries failed reads itself (one retry layer)",
	"Runtime.Exec.Backoff":       "unused with Retries = 0",
	"Summary.Change":             "internal: the change that publishes a summary early",
	"Summary.Site":               "[DEFAULT] site",
	"SchedAPI.StaleAfter":        "3 x [monitor] summary_interval",
	"SchedAPI.CPUOverload":       "[scheduler] cpu_overload",
	"SchedAPI.RAMOverload":       "[scheduler] ram_overload",
	"SchedAPIHTTP.HeaderTimeout": "internal: 5 s for a request's header, as before the body",
	"SchedAPIHTTP.MaxInFlight":   "internal: the service's bound on requests in progress",
	"SchedAPIHTTP.MaxBody":       "internal: 8 MiB, far above a RequestSpec with thousands of hosts",
	"SchedAPIHTTP.Region":        "[DEFAULT] region, the metrics' region label, set when the service starts",
	"Operator.MessageWindow":     "[DEFAULT] message_window, the agents' own, which dvms events --follow falls back to",
}

// Every configuration field is an option or listed in notOptions: a new
// field of scheduler.Config or node.Config needs a row or a reason.
func TestEveryFieldIsAnOptionOrListed(t *testing.T) {
	var c Config
	// A field by address and type: a struct and its first field share
	// an address.
	type field struct {
		p uintptr
		t reflect.Type
	}
	bound := map[field]string{}
	for i := range Options {
		o := &Options[i]
		v := reflect.ValueOf(o.field(&c))
		p := field{v.Pointer(), v.Type()}
		if prev, dup := bound[p]; dup {
			t.Errorf("[%s] %s and %s bind the same field", o.section, o.name, prev)
		}
		bound[p] = "[" + o.section + "] " + o.name
	}
	listed := map[string]bool{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), v.Type().Field(i).Name
			if path != "" {
				name = path + "." + name
			}
			_, isOption := bound[field{f.Addr().Pointer(), f.Addr().Type()}]
			if f.Kind() == reflect.Struct && !isOption { // a struct option (windows) is one field
				walk(f, name)
				continue
			}
			_, isListed := notOptions[name]
			listed[name] = true
			switch {
			case !isOption && !isListed:
				t.Errorf("%s is neither an option (options.go) nor in notOptions", name)
			case isOption && isListed:
				t.Errorf("%s is an option and in notOptions", name)
			}
		}
	}
	walk(reflect.ValueOf(&c).Elem(), "")
	for name := range notOptions {
		if !listed[name] {
			t.Errorf("notOptions names %s, which is no field", name)
		}
	}
}

// The problems issue 11 lists, each of which surfaced one start at a
// time or not at all, are all reported by one load.
func TestConfigListsEveryProblem(t *testing.T) {
	bad := `[DEFAULT]
region = Region One
os_cloud = mine
control_max_age = 10
[nova]
request_timeout = -5
[nats]
url = not a url
tls_cert = /etc/dvms/cert.pem
[scheduler]
cpu_overload = 7.5
cpu_underload = 2
debounce_k = 9
[monitor]
source = tea-leaves
drain_reason_pattern = ([
colour = blue
[consensus]
voters = 4
bind = no-port
[extra]
x = 1
`
	_, err := load(t, bad)
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	wants := []string{
		`[DEFAULT] region = "Region One": want letters, digits`,
		`[DEFAULT] os_cloud: unknown option (it belongs in [nova])`,
		`[DEFAULT] control_max_age 10s must be >= message_window 30s`,
		`[nova] request_timeout = "-5": must be > 0`,
		`[nats] url = "not a url": want nats`,
		`tls_cert and tls_key go together`,
		`[scheduler] cpu_overload = "7.5": must be in (0, 1]`,
		`[scheduler] cpu_underload = "2": must be in [0, 1)`,
		`debounce K=9 of N=5`,
		`[monitor] source = "tea-leaves": want one of`,
		`[monitor] drain_reason_pattern = "([":`,
		`[monitor] colour: unknown option`,
		`[consensus] voters = "4": want one of 3, 5`,
		`[consensus] bind = "no-port": want host:port`,
		`[extra]: unknown section`,
		ErrNoCloud.Error(),
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(wants) {
		t.Errorf("%d problems reported, want %d (one line each, nothing else)", n, len(wants))
	}
	if t.Failed() {
		t.Logf("the error:\n%v", err)
	}
}

func TestValuesAgainstTheirRows(t *testing.T) {
	cases := []struct {
		section, name, value string
		ok                   bool
	}{
		{"scheduler", "cpu_overload", "1", true},
		{"scheduler", "cpu_overload", "0", false},
		{"scheduler", "cpu_underload", "0", true},
		{"scheduler", "cpu_underload", "1", false},
		{"scheduler", "queued_migrations_per_host", "0", true},
		{"scheduler", "queued_migrations_per_host", "-1", false},
		{"scheduler", "debounce_k", "2.5", false},
		{"scheduler", "preempt", "yes", true}, // oslo.config's booleans
		{"scheduler", "preempt", "Off", true},
		{"scheduler", "preempt", "maybe", false},
		{"DEFAULT", "message_window", "1e10", false}, // past a time.Duration
		{"DEFAULT", "message_window", "1e-12", false},
		{"scheduler", "relief_partition", "99999999999999999999", false},
		{"scheduler", "poll_interval", "NaN", false},
		{"nats", "url", "nats://a:4222, tls://b:4222", true},
		{"nats", "url", "http://a:4222", false},
		{"nats", "url", "", false},
		{"monitor", "prometheus_url", "", true},
		{"monitor", "prometheus_url", "127.0.0.1:9090", false},
		{"consensus", "bind", "127.0.0.1:0", true},
		{"consensus", "bind", "127.0.0.1:70000", false},
		{"consensus", "advertise", "", true},
		{"DEFAULT", "region", "eu-west_2", true},
		{"DEFAULT", "region", "eu.west", false},
		{"scheduler", "windows", "", true},
		{"scheduler", "windows", "underload=22:00-06:00 Europe/Paris, overload=always", true},
		{"scheduler", "windows", "underload=22:00-06:00 Mars/Base", false},
		{"scheduler", "server_cooldown", "1800", true},
		{"scheduler", "server_cooldown", "-1", false},
	}
	for _, tc := range cases {
		o := LookupOption(tc.section, tc.name)
		var c Config
		c.Runtime = node.DefaultConfig()
		if err := o.set(&c, tc.value); (err == nil) != tc.ok {
			t.Errorf("[%s] %s = %q: error %v, want ok=%v", tc.section, tc.name, tc.value, err, tc.ok)
		}
	}
}

// The cloud, as doc/source/admin/configure.rst says: --os-cloud, else [nova] os_cloud (which
// DVMS_NOVA_OS_CLOUD overrides), else OS_CLOUD, else an error.
func TestCloudPrecedence(t *testing.T) {
	osCloud := LookupOption("nova", "os_cloud")
	cases := []struct {
		flag, file string
		env        []string
		want       string
	}{
		{flag: "flag", file: "file", env: []string{"OS_CLOUD=env"}, want: "flag"},
		{file: "file", env: []string{"OS_CLOUD=env"}, want: "file"},
		{file: "file", env: []string{"DVMS_NOVA_OS_CLOUD=dvms", "OS_CLOUD=env"}, want: "dvms"},
		{env: []string{"OS_CLOUD=env"}, want: "env"},
		{env: []string{"OS_CLOUD="}},
		{},
	}
	for _, tc := range cases {
		src := Source{Env: fakeEnv(tc.env...)}
		if tc.file != "" {
			src.File = filepath.Join(t.TempDir(), "dvms.conf")
			if err := os.WriteFile(src.File, []byte("[nova]\nos_cloud = "+tc.file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if tc.flag != "" {
			src.Flags = []FlagValue{{osCloud, tc.flag}}
		}
		c, err := Load(src, "compute-1")
		if tc.want == "" {
			if !errors.Is(err, ErrNoCloud) {
				t.Errorf("%+v: error %v, want %v", tc, err, ErrNoCloud)
			}
			continue
		}
		if err != nil || c.OSCloud != tc.want {
			t.Errorf("%+v: cloud %q (%v), want %q", tc, c.OSCloud, err, tc.want)
		}
	}
}

func TestEnvironmentOverridesFileAndFlagsOverrideBoth(t *testing.T) {
	c, err := load(t, "[nats]\nurl = nats://file:4222\n[scheduler]\ncpu_overload = 0.8\n",
		"DVMS_NATS_URL=nats://env:4222", "DVMS_SCHEDULER_CPU_OVERLOAD=0.9", "DVMS_REGION=eu", "OS_CLOUD=c")
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSURL != "nats://env:4222" || c.Agent.Thresholds.CPUOverload != 0.9 || c.Runtime.Region != "eu" {
		t.Fatalf("environment not applied: %s %v %s", c.NATSURL, c.Agent.Thresholds.CPUOverload, c.Runtime.Region)
	}
	src := Source{Env: fakeEnv("DVMS_NATS_URL=nats://env:4222", "OS_CLOUD=c"),
		Flags: []FlagValue{{LookupOption("nats", "url"), "nats://flag:4222"}}}
	if c, err = Load(src, "compute-1"); err != nil || c.NATSURL != "nats://flag:4222" {
		t.Fatalf("flag not applied: %s %v", c.NATSURL, err)
	}
	_, err = load(t, "", "DVMS_SCHEDULER_DEBOUNCE_N=x", "OS_CLOUD=c")
	if err == nil || !strings.Contains(err.Error(), `DVMS_SCHEDULER_DEBOUNCE_N ([scheduler] debounce_n) = "x"`) {
		t.Fatalf("a bad environment value is not named: %v", err)
	}
}

// membership = swim: seeds must be host:port, a key file is required
// unless messages are unsigned anyway, and the key file is read as base64
// of 16, 24 or 32 bytes.
func TestSwimMembershipConfig(t *testing.T) {
	_, err := load(t, "[nova]\nos_cloud = c\n[consensus]\nmembership = swim\nswim_seeds = 10.0.0.1:7946, no-port\n")
	for _, want := range []string{`swim_seeds: "no-port" is not host:port`, "membership = swim needs swim_key_file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.key"), filepath.Join(dir, "bad.key")
	if err := os.WriteFile(good, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600); err != nil { // "short"
		t.Fatal(err)
	}
	c, err := load(t, "[nova]\nos_cloud = c\n[consensus]\nmembership = swim\nswim_bind = 10.0.0.2:7950\nswim_seeds = 10.0.0.1:7946,10.0.0.3:7946\nswim_key_file = "+good+"\n")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := swimConfig(c, "nats://127.0.0.1:4222", node.Heartbeat{Host: "compute-1", Incarnation: "1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Key) != 32 || sc.BindAddr != "10.0.0.2" || sc.BindPort != 7950 || len(sc.Seeds) != 2 {
		t.Errorf("swim config %d-byte key, bind %s:%d, seeds %v", len(sc.Key), sc.BindAddr, sc.BindPort, sc.Seeds)
	}
	c.SwimKeyFile = bad
	if _, err := swimConfig(c, "nats://127.0.0.1:4222", node.Heartbeat{Host: "compute-1", Incarnation: "1"}, nil, nil); err == nil || !strings.Contains(err.Error(), "key of 5 bytes") {
		t.Errorf("a 5-byte key: %v", err)
	}
}

// Under membership = swim, memberlist's probes feed the coordinates: the
// bus probes are off unless rtt_probe_interval is given (file, environment
// or flag); under heartbeats they keep their default.
func TestRTTProbeDefaultFollowsMembership(t *testing.T) {
	const swim = "[nova]\nos_cloud = c\n[DEFAULT]\ninsecure_unsigned = true\n[consensus]\nmembership = swim\n"
	for _, c := range []struct {
		name, file string
		env        []string
		want       time.Duration
	}{
		{"heartbeat", "[nova]\nos_cloud = c\n", nil, time.Second},
		{"heartbeat, set", "[nova]\nos_cloud = c\n[scheduler]\nrtt_probe_interval = 2\n", nil, 2 * time.Second},
		{"swim", swim, nil, 0},
		{"swim, set in the file", swim + "[scheduler]\nrtt_probe_interval = 1\n", nil, time.Second},
		{"swim, set in the environment", swim, []string{"DVMS_SCHEDULER_RTT_PROBE_INTERVAL=0.5"}, 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.file, c.env...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Coord.Probe != c.want {
				t.Errorf("rtt probe interval %s, want %s", cfg.Coord.Probe, c.want)
			}
			if cfg.Membership != "swim" {
				return
			}
			// One source of RTT samples: memberlist's probes exactly when
			// the bus probes are off.
			viv, err := node.NewVivaldi(cfg.Coord, "r", "compute-1", nil, node.Wall{}, node.NewCoordTable(), 1, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			sc, err := swimConfig(cfg, "nats://127.0.0.1:4222", node.Heartbeat{Host: "compute-1", Incarnation: "1"}, nil, viv)
			if err != nil {
				t.Fatal(err)
			}
			if (sc.Observe != nil) != (c.want == 0) || sc.SelfCoord == nil {
				t.Errorf("probes %s: memberlist samples wired %v, coordinate in acks %v", c.want, sc.Observe != nil, sc.SelfCoord != nil)
			}
		})
	}
}

// swim_advertise, when empty, is derived as Raft's advertise address: the
// bind address if it names one, else the route to NATS with bind's port.
func TestSwimAdvertiseDerived(t *testing.T) {
	base, err := load(t, "[nova]\nos_cloud = c\n[DEFAULT]\ninsecure_unsigned = true\n[consensus]\nmembership = swim\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bind, adv, nats string
		addr            string
		port            int
	}{
		{"0.0.0.0:7950", "", "nats://127.0.0.1:4222", "127.0.0.1", 7950},
		{":7950", "", "nats://127.0.0.1", "127.0.0.1", 7950},
		{"10.0.0.2:7950", "", "nats://127.0.0.1:4222", "", 0}, // memberlist advertises its bind address
		{"0.0.0.0:7950", "192.0.2.7:7000", "nats://127.0.0.1:4222", "192.0.2.7", 7000},
	} {
		cfg := base
		cfg.SwimBind, cfg.SwimAdvertise = c.bind, c.adv
		sc, err := swimConfig(cfg, c.nats, node.Heartbeat{Host: "compute-1", Incarnation: "1"}, nil, nil)
		if err != nil || sc.AdvertiseAddr != c.addr || sc.AdvertisePort != c.port {
			t.Errorf("bind %q advertise %q: advertised %s:%d, %v; want %s:%d", c.bind, c.adv, sc.AdvertiseAddr, sc.AdvertisePort, err, c.addr, c.port)
		}
	}
	cfg := base
	if _, err := swimConfig(cfg, "::bad", node.Heartbeat{Host: "compute-1", Incarnation: "1"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "[consensus] swim_advertise") {
		t.Errorf("underivable advertise address: %v", err)
	}
}

// [scheduler] windows and server_cooldown reach the agent's
// configuration; a bad window names the option and the entry.
func TestWindowsAndCooldownOptions(t *testing.T) {
	c, err := load(t, "[nova]\nos_cloud = mine\n[scheduler]\nwindows = underload=22:00-06:00 Europe/Paris, maintenance=never\nserver_cooldown = 1800\n")
	if err != nil {
		t.Fatal(err)
	}
	noonParis := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	w := c.Agent.Windows
	if w.Open(scheduler.Underload, noonParis) || !w.Open(scheduler.Underload, noonParis.Add(11*time.Hour)) ||
		!w.Open(scheduler.Overload, noonParis) || w.Open(scheduler.Maintenance, noonParis) {
		t.Errorf("windows loaded as %q", w)
	}
	if c.Agent.ServerCooldown != 30*time.Minute {
		t.Errorf("server_cooldown %v", c.Agent.ServerCooldown)
	}
	_, err = load(t, "[nova]\nos_cloud = mine\n[scheduler]\nwindows = relief=22:00-06:00\n")
	if err == nil || !strings.Contains(err.Error(), `[scheduler] windows = "relief=22:00-06:00"`) || !strings.Contains(err.Error(), `kind "relief"`) {
		t.Errorf("bad window: %v", err)
	}
}
