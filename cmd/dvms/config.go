package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/ini.v1"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// fileConfig is the agent configuration read from the INI file
// (etc/dvms/dvms.conf.sample documents every option), then overridden by
// DVMS_<SECTION>_<OPTION> environment variables and flags.
type fileConfig struct {
	Region    string
	LogLevel  string
	LogFormat string

	OSCloud        string
	CloudsYAML     string
	RequestTimeout time.Duration

	NATSURL   string
	NATSCreds string
	TLSCA     string
	TLSCert   string
	TLSKey    string

	Agent   scheduler.Config
	Runtime node.Config

	MonitorSource string
	FilePath      string
	CgroupRoot    string
	PromURL       string
	PromCPUQuery  string
	PromRAMQuery  string
	PromUUIDLabel string
	Arbiter       string
	Voters        int

	Site           string
	RaftBind       string
	RaftAdvertise  string
	Heartbeat      time.Duration
	DeadAfter      time.Duration
	UnshelveEvery  time.Duration
	UnshelveMargin float64
}

func defaultFileConfig(host string) fileConfig {
	return fileConfig{
		Region: "RegionOne", LogLevel: "info", LogFormat: "json",
		OSCloud: "envvars", RequestTimeout: 30 * time.Second,
		NATSURL: "nats://127.0.0.1:4222",
		Agent:   scheduler.DefaultConfig(host), Runtime: node.DefaultConfig(),
		MonitorSource: "nova-diagnostics", CgroupRoot: "/sys/fs/cgroup", PromUUIDLabel: "uuid",
		Arbiter: "raft", Voters: 3,
		RaftBind: "0.0.0.0:7420", Heartbeat: time.Second, DeadAfter: 5 * time.Second,
		UnshelveEvery: 30 * time.Second, UnshelveMargin: 0.1,
	}
}

// configReader reads options from the file with environment overrides,
// collecting every problem instead of stopping at the first.
type configReader struct {
	f    *ini.File
	errs []error
}

func (r *configReader) raw(section, key string) (string, bool) {
	env := "DVMS_" + strings.ToUpper(section+"_"+key)
	if section == "DEFAULT" {
		env = "DVMS_" + strings.ToUpper(key)
	}
	if v, ok := os.LookupEnv(env); ok {
		return v, true
	}
	if r.f == nil {
		return "", false
	}
	s, err := r.f.GetSection(section)
	if err != nil || !s.HasKey(key) {
		return "", false
	}
	return strings.TrimSpace(s.Key(key).String()), true
}

func (r *configReader) str(section, key string, dst *string) {
	if v, ok := r.raw(section, key); ok {
		*dst = v
	}
}

func (r *configReader) float(section, key string, dst *float64) {
	if v, ok := r.raw(section, key); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("[%s] %s = %q: not a number", section, key, v))
			return
		}
		*dst = f
	}
}

func (r *configReader) int(section, key string, dst *int) {
	if v, ok := r.raw(section, key); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("[%s] %s = %q: not an integer", section, key, v))
			return
		}
		*dst = n
	}
}

func (r *configReader) bool(section, key string, dst *bool) {
	if v, ok := r.raw(section, key); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("[%s] %s = %q: not a boolean", section, key, v))
			return
		}
		*dst = b
	}
}

func (r *configReader) seconds(section, key string, dst *time.Duration) {
	f := dst.Seconds()
	before := len(r.errs)
	r.float(section, key, &f)
	if len(r.errs) == before {
		*dst = time.Duration(f * float64(time.Second))
	}
}

// loadConfig reads path (may be "" for defaults + environment only).
func loadConfig(path, host string) (fileConfig, error) {
	c := defaultFileConfig(host)
	r := &configReader{}
	if path != "" {
		f, err := ini.LoadSources(ini.LoadOptions{Insensitive: false, AllowBooleanKeys: false}, path)
		if err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		r.f = f
	}
	r.str("DEFAULT", "region", &c.Region)
	r.str("DEFAULT", "log_level", &c.LogLevel)
	r.str("DEFAULT", "log_format", &c.LogFormat)
	r.str("DEFAULT", "site", &c.Site)
	r.str("nova", "os_cloud", &c.OSCloud)
	r.str("nova", "clouds_yaml", &c.CloudsYAML)
	r.seconds("nova", "request_timeout", &c.RequestTimeout)
	r.str("nats", "url", &c.NATSURL)
	r.str("nats", "creds_file", &c.NATSCreds)
	r.str("nats", "tls_ca", &c.TLSCA)
	r.str("nats", "tls_cert", &c.TLSCert)
	r.str("nats", "tls_key", &c.TLSKey)

	a := &c.Agent
	r.float("scheduler", "cpu_overload", &a.Thresholds.CPUOverload)
	r.float("scheduler", "ram_overload", &a.Thresholds.RAMOverload)
	r.float("scheduler", "cpu_underload", &a.Thresholds.CPUUnderload)
	r.float("scheduler", "ram_underload", &a.Thresholds.RAMUnderload)
	r.bool("scheduler", "underload", &a.Underload)
	r.int("scheduler", "debounce_k", &a.K)
	r.int("scheduler", "debounce_n", &a.N)
	r.seconds("scheduler", "partition_timeout", &a.PartitionTimeout)
	r.seconds("scheduler", "snapshot_timeout", &a.SnapshotTimeout)
	r.seconds("scheduler", "progress_timeout", &a.ProgressTimeout)
	r.seconds("scheduler", "retry_backoff", &a.RetryBackoff)
	r.seconds("scheduler", "max_retry_backoff", &a.MaxRetryBackoff)
	r.seconds("scheduler", "solve_timeout", &a.SolveTimeout)
	r.bool("scheduler", "preempt", &a.Preempt)
	r.int("scheduler", "max_migrations_per_host", &a.Limits.PerHost)
	r.int("scheduler", "max_migrations_per_partition", &a.Limits.PerPartition)
	rt := &c.Runtime
	r.seconds("scheduler", "migration_timeout", &rt.Exec.MigrationTimeout)
	r.seconds("scheduler", "poll_interval", &rt.Exec.Poll)
	r.bool("scheduler", "advise_only", &rt.Exec.DryRun)
	r.seconds("scheduler", "stop_grace", &rt.StopGrace)
	r.seconds("scheduler", "unshelve_interval", &c.UnshelveEvery)
	r.float("scheduler", "unshelve_headroom", &c.UnshelveMargin)
	rt.Region = c.Region
	r.seconds("monitor", "interval", &rt.Monitor)
	pattern := rt.DrainReason.String()
	r.str("monitor", "drain_reason_pattern", &pattern)
	if re, err := regexp.Compile(pattern); err != nil {
		r.errs = append(r.errs, fmt.Errorf("[monitor] drain_reason_pattern: %w", err))
	} else {
		rt.DrainReason = re
	}
	r.str("monitor", "source", &c.MonitorSource)
	r.str("monitor", "file_path", &c.FilePath)
	r.str("monitor", "cgroup_root", &c.CgroupRoot)
	r.str("monitor", "prometheus_url", &c.PromURL)
	r.str("monitor", "prometheus_cpu_query", &c.PromCPUQuery)
	r.str("monitor", "prometheus_ram_query", &c.PromRAMQuery)
	r.str("monitor", "prometheus_uuid_label", &c.PromUUIDLabel)
	r.str("consensus", "arbiter", &c.Arbiter)
	r.int("consensus", "voters", &c.Voters)
	r.str("consensus", "bind", &c.RaftBind)
	r.str("consensus", "advertise", &c.RaftAdvertise)
	r.seconds("consensus", "heartbeat_interval", &c.Heartbeat)
	r.seconds("consensus", "dead_after", &c.DeadAfter)
	r.errs = append(r.errs, c.validate())
	return c, errors.Join(r.errs...)
}

func (c fileConfig) validate() error {
	var errs []error
	if err := c.Agent.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Runtime.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.MonitorSource {
	case "file":
		if c.FilePath == "" {
			errs = append(errs, errors.New("[monitor] source = file needs file_path"))
		}
	case "cgroup", "nova-diagnostics":
	case "prometheus":
		if c.PromURL == "" || c.PromCPUQuery == "" {
			errs = append(errs, errors.New("[monitor] source = prometheus needs prometheus_url and prometheus_cpu_query"))
		}
	default:
		errs = append(errs, fmt.Errorf("[monitor] source %q: want file, cgroup, nova-diagnostics or prometheus", c.MonitorSource))
	}
	switch c.Arbiter {
	case "raft", "local":
	default:
		errs = append(errs, fmt.Errorf("[consensus] arbiter %q: want raft or local", c.Arbiter))
	}
	if c.Voters != 3 && c.Voters != 5 {
		errs = append(errs, fmt.Errorf("[consensus] voters = %d: want 3 or 5", c.Voters))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		errs = append(errs, fmt.Errorf("[DEFAULT] log_format %q: want json or console", c.LogFormat))
	}
	if c.Heartbeat <= 0 || c.DeadAfter <= 2*c.Heartbeat {
		errs = append(errs, fmt.Errorf("[consensus] need 0 < heartbeat_interval (%s) and dead_after (%s) > 2 x heartbeat_interval", c.Heartbeat, c.DeadAfter))
	}
	if c.UnshelveEvery < 0 || c.UnshelveMargin < 0 || c.UnshelveMargin >= 1 {
		errs = append(errs, errors.New("[scheduler] need unshelve_interval >= 0 and 0 <= unshelve_headroom < 1"))
	}
	if c.NATSURL == "" {
		errs = append(errs, errors.New("[nats] url is required"))
	}
	return errors.Join(errs...)
}
