package daemon

import (
	"strings"

	"github.com/dvms-project/dvms/scheduler"
)

// The agent's option table: every option of dvms.conf is one row below.
// The loader (config.go), the validation of single values, the sample
// file etc/dvms/dvms.conf.sample (`dvms config sample`), the configuration
// reference doc/source/configuration/reference.rst (`dvms config
// reference`; both rewritten by `go generate ./cmd/dvms`) and the tests
// that keep them in step all read this table.
//
// To add an option: add a row in its section (the sample lists rows in
// table order), bind it to its field, give the default the package's
// DefaultConfig gives (TestTableDefaultsArePackageDefaults checks it),
// then run `go generate ./cmd/dvms` to rewrite the sample and the
// reference (`dvms config` writes them). A field of scheduler.Config or
// node.Config that is not an option goes in notOptions (config_test.go)
// with the reason.

// option is one row of the table.
type Option struct {
	section, name string
	kind          kind
	// def is the default as written in the file; the loader applies it
	// before the file, so it is the agent's default.
	def string
	// unit of a number ("" when the kind says it, like seconds).
	unit string
	help string
	// bounds of a number: "> 0", ">= 1", "(0, 1]", "[0, 1)"; "" = any.
	bounds string
	// choices the value must be one of (kind enum, or a number like voters).
	choices []string
	// required: the empty value is refused.
	required bool
	// flag of `dvms agent` that overrides the option ("" = none).
	flag string
	// live: a reload of the running agent (SIGHUP, systemctl reload)
	// applies a new value (service.go, option.apply); the other options
	// need a restart.
	live bool
	// field is the value's destination, a pointer whose type the kind
	// decides (see kind.parse).
	field func(c *Config) any
}

// Sections in the order of the sample.
var Sections = []string{"DEFAULT", "nova", "nats", "scheduler", "monitor", "consensus", "scheduler_api", "operator"}

var Options = []Option{
	{section: "DEFAULT", name: "region", kind: kindName, def: "RegionOne", required: true,
		help:  "Region name: one ring (and one merge arbiter group) per region. It is part of NATS subjects.",
		field: func(c *Config) any { return &c.Runtime.Region }},
	{section: "DEFAULT", name: "log_level", kind: kindEnum, def: "info", flag: "log-level", choices: []string{"debug", "info", "warn", "error"}, live: true,
		help: "Log level. The only option a running agent re-reads on SIGHUP (systemctl reload dvms-agent@HOST); " +
			"every other option needs a restart (the reload names those that changed).",
		field: func(c *Config) any { return &c.LogLevel }},
	{section: "DEFAULT", name: "log_format", kind: kindEnum, def: "json", choices: []string{"json", "console"},
		help:  "Log format: json (for journald and log shippers) or console.",
		field: func(c *Config) any { return &c.LogFormat }},
	{section: "DEFAULT", name: "site", kind: kindString,
		help:  "Site (availability zone, datacenter) of this host: the merge arbiter's voters are spread across sites. Empty = one site.",
		field: func(c *Config) any { return &c.Site }},
	{section: "DEFAULT", name: "metrics_listen", kind: kindAddr, def: "127.0.0.1:9464", flag: "metrics-listen",
		help: "Address of the agent's Prometheus /metrics and /healthz endpoint (port 0 picks one); empty = none. " +
			"Loopback by default: neither endpoint authenticates, so for a Prometheus on another machine set the host's management address and firewall the port.",
		field: func(c *Config) any { return &c.MetricsListen }},

	{section: "DEFAULT", name: "keys_dir", kind: kindPath,
		help: "Directory of the region's message keys: <host>.pub of every agent (nkeys user keys, `dvms keygen`) and this host's " +
			"private <host>.key (mode 0600). Every message, heartbeat and arbiter request is signed with the private key and " +
			"accepted only when it verifies against its sender's public key. Its subdirectory operators/ holds the public keys (NAME.pub) of the " +
			"operators whose run-time commands (dvms pause, resume, mode, exclude, include) the agent takes; without it, every such command is refused. " +
			"Empty: the agent refuses to start unless insecure_unsigned.",
		field: func(c *Config) any { return &c.KeysDir }},
	{section: "DEFAULT", name: "state_dir", kind: kindPath,
		help: "Directory where the agent keeps the grants it gave for moves off its host (grants-HOST.json, written before each grant is answered), " +
			"so that after a restart it waits until Nova says those moves ended before its host takes part in another plan. " +
			"Empty: $STATE_DIRECTORY (systemd's StateDirectory=, /var/lib/dvms with the shipped unit); without either, grants are kept in memory only " +
			"and a restarted agent does not know what it granted (logged at start).",
		field: func(c *Config) any { return &c.Runtime.StateDir }},
	{section: "DEFAULT", name: "message_window", kind: kindSeconds, def: "30", bounds: "> 0",
		help:  "A signed message is accepted within this long of its signing time, either way (clock skew and delivery), and its replay refused.",
		field: func(c *Config) any { return &c.MessageWindow }},
	{section: "DEFAULT", name: "control_max_age", kind: kindSeconds, def: "604800", bounds: "> 0",
		help: "An operator's run-time command (dvms pause, resume, mode, exclude, include) counts for this long after it was signed, " +
			"also when another agent passes it on; then every agent forgets it and its register falls back to the default. " +
			"Send the command again to keep it longer. 604800 = 7 days: it outlives agent restarts and a weekend, and an old " +
			"signed command cannot be replayed for ever.",
		field: func(c *Config) any { return &c.ControlMaxAge }},
	{section: "DEFAULT", name: "insecure_unsigned", kind: kindBool, def: "false",
		help: "Run without keys_dir: messages are neither signed nor verified, so anyone who can publish on the NATS subjects " +
			"can steer this agent (move servers, stall events). Trials only.",
		field: func(c *Config) any { return &c.InsecureUnsigned }},

	{section: "nova", name: "os_cloud", kind: kindString, flag: "os-cloud",
		help: "Cloud name in clouds.yaml. --os-cloud overrides it; empty = the OS_CLOUD environment variable. " +
			"One of the three must name a cloud.",
		field: func(c *Config) any { return &c.OSCloud }},
	{section: "nova", name: "clouds_yaml", kind: kindPath,
		help:  "clouds.yaml to read; empty = the openstack CLI's search path ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack, /etc/openstack).",
		field: func(c *Config) any { return &c.CloudsYAML }},
	{section: "nova", name: "server_metadata_controls", kind: kindBool, def: "false",
		help: "Also honour dvms:pin, dvms:priority and dvms:maintenance_action set in a server's metadata, which its owner (a tenant) can write. " +
			"Without it only the flavor's extra specs count (openstack flavor set --property dvms:pin=true), which only operators set.",
		field: func(c *Config) any { return &c.ServerMetadataControls }},
	{section: "nova", name: "request_timeout", kind: kindSeconds, def: "30", bounds: "> 0",
		help:  "Bound on one Nova or placement API request.",
		field: func(c *Config) any { return &c.RequestTimeout }},

	{section: "nats", name: "url", kind: kindNATSURLs, def: "nats://127.0.0.1:4222", required: true, flag: "nats-url",
		help:  "NATS server URL(s), comma separated.",
		field: func(c *Config) any { return &c.NATSURL }},
	{section: "nats", name: "creds_file", kind: kindPath,
		help:  "NATS credentials file (JWT + nkey seed), optional.",
		field: func(c *Config) any { return &c.NATSCreds }},
	{section: "nats", name: "nkey_auth", kind: kindBool, def: "false",
		help: "Authenticate to NATS as the nkeys user of this agent's own message key (keys_dir/HOST.key). " +
			"The NATS server must list the region's keys with their subject permissions: see `dvms nats-config`.",
		field: func(c *Config) any { return &c.NATSNkeyAuth }},
	{section: "nats", name: "nkey_seed", kind: kindPath,
		help:  "Authenticate to NATS with this nkeys user seed when the process is not an agent (dvms scheduler-api: an observer key of `dvms nats-config --observer`).",
		field: func(c *Config) any { return &c.NATSNkeySeed }},
	{section: "nats", name: "tls_ca", kind: kindPath,
		help:  "TLS: CA bundle of the NATS servers, optional.",
		field: func(c *Config) any { return &c.TLSCA }},
	{section: "nats", name: "tls_cert", kind: kindPath,
		help:  "TLS: client certificate, optional; goes with tls_key.",
		field: func(c *Config) any { return &c.TLSCert }},
	{section: "nats", name: "tls_key", kind: kindPath,
		help:  "TLS: client key, optional; goes with tls_cert.",
		field: func(c *Config) any { return &c.TLSKey }},

	{section: "scheduler", name: "cpu_overload", kind: kindFloat, def: "1.0", bounds: "(0, 1]", unit: "fraction of the host's cores",
		help:  "OVERLOAD when the CPU demand of the host's servers exceeds this fraction of its cores.",
		field: func(c *Config) any { return &c.Agent.Thresholds.CPUOverload }},
	{section: "scheduler", name: "ram_overload", kind: kindFloat, def: "1.0", bounds: "(0, 1]", unit: "fraction of the host's RAM",
		help:  "OVERLOAD when the RAM demand of the host's servers exceeds this fraction of its RAM.",
		field: func(c *Config) any { return &c.Agent.Thresholds.RAMOverload }},
	{section: "scheduler", name: "cpu_underload", kind: kindFloat, def: "0.2", bounds: "[0, 1)", unit: "fraction of the host's cores",
		help:  "With underload: UNDERLOAD (consolidation) when CPU demand is below this fraction and RAM demand below ram_underload. Below cpu_overload.",
		field: func(c *Config) any { return &c.Agent.Thresholds.CPUUnderload }},
	{section: "scheduler", name: "ram_underload", kind: kindFloat, def: "0.2", bounds: "[0, 1)", unit: "fraction of the host's RAM",
		help:  "With underload: see cpu_underload. Below ram_overload.",
		field: func(c *Config) any { return &c.Agent.Thresholds.RAMUnderload }},
	{section: "scheduler", name: "underload", kind: kindBool, def: "false",
		help:  "Raise UNDERLOAD events (consolidation); opt-in.",
		field: func(c *Config) any { return &c.Agent.Underload }},
	{section: "scheduler", name: "consolidation_cooldown", kind: kindSeconds, def: "600", bounds: ">= 0",
		help:  "With underload: a server that arrived on a host less than this long ago is not moved by consolidation (no ping-pong).",
		field: func(c *Config) any { return &c.Agent.ConsolidationCooldown }},
	{section: "scheduler", name: "server_cooldown", kind: kindSeconds, def: "0", bounds: ">= 0",
		help: "A server dvms moved onto a host less than this long ago is not moved again by relief or consolidation (a drain moves it): " +
			"no server goes back and forth while demand flaps. 0 turns it off; 1800 (30 minutes) suits demand that flaps.",
		field: func(c *Config) any { return &c.Agent.ServerCooldown }},
	{section: "scheduler", name: "destination_peak_window", kind: kindSeconds, def: "0", bounds: ">= 0",
		help: "Relief and consolidation judge a destination by its servers' highest demand measured within this window plus the incoming server's, " +
			"not by their demand now: a host whose flapping servers happen to be low does not look roomy. Overload detection stays on demand now. " +
			"0 turns it off; at least one period of the demand's swings (e.g. 600 for demand that flaps every 10 minutes).",
		field: func(c *Config) any { return &c.Agent.DestinationPeakWindow }},
	{section: "scheduler", name: "move_cost", kind: kindFloat, def: "0", bounds: ">= 0", unit: "points per move",
		help: "Moves that pay for themselves: each live migration of relief or consolidation costs this many points, plus move_cost_per_second; " +
			"a plan whose moves cost more than it gains is refused (drains always go). A point is 1 % of a host's capacity: relieving a host gains how far it is above " +
			"its overload threshold (a host at 91 % CPU with cpu_overload 0.85 gains 6), times the 20-second spans its overload is expected to last (at least one: " +
			"as long as it has been overloaded since a server last left it, or as long as its destination_peak_window profile was over), emptying an underloaded host gains 100. 0 with move_cost_per_second 0: off.",
		field: func(c *Config) any { return &c.Agent.MoveCost }},
	{section: "scheduler", name: "move_cost_per_second", kind: kindFloat, def: "0", bounds: ">= 0", unit: "points per second",
		help: "With move_cost: what each second of a live migration costs, in points, for the time the migration model predicts " +
			"(the server's RAM over its host pair's bandwidth less its dirty rate, learnt from recent migrations; migration_bandwidth before any). " +
			"With either set, relief also prefers the cheapest moves (small, quiet servers), and a partition grows for room for fewer moves (relief_headroom).",
		field: func(c *Config) any { return &c.Agent.MoveCostPerSecond }},
	{section: "scheduler", name: "oscillation_events", kind: kindInt, def: "3", bounds: ">= 2", unit: "events",
		help: "Oscillation report (observed only, nothing decided on it): this many OVERLOAD events of one host ended solved within oscillation_window " +
			"is an oscillation: a warning in the log, dvms_oscillations_total{kind=\"host_relieved\"} and the Oscillations column of dvms status (detections within the window).",
		field: func(c *Config) any { return &c.Runtime.Oscillation.Events }},
	{section: "scheduler", name: "oscillation_window", kind: kindSeconds, def: "1800", bounds: "> 0",
		help: "Oscillation report: the window of oscillation_events, and of a server dvms moved back where it took it from " +
			"(moved A to B, then B to A, by moves this agent executed or followed in Nova): dvms_oscillations_total{kind=\"server_moved_back\"}.",
		field: func(c *Config) any { return &c.Runtime.Oscillation.Window }},
	{section: "scheduler", name: "windows", kind: kindWindows,
		help: "When each event kind may be raised: KIND=SPEC entries separated by commas, KIND overload, underload or maintenance, " +
			"SPEC always, never or [DAYS] HH:MM-HH:MM ranges (crossing midnight allowed, 24:00 as an end, DAYS like mon-fri) and an IANA time zone " +
			"(UTC when left out), for example underload=22:00-06:00 Europe/Paris, overload=always. A kind not listed is always open (so drains run unless " +
			"maintenance= says otherwise). Outside its window an agent keeps sampling and raises no event of that kind; a condition that still holds " +
			"K of N samples when the window opens is raised then.",
		field: func(c *Config) any { return &c.Agent.Windows }},
	{section: "scheduler", name: "consolidation_headroom", kind: kindFloat, def: "0.1", bounds: "[0, 1)", unit: "fraction of the thresholds",
		help:  "With underload: consolidation leaves this fraction of a destination's demand limits free, so it never creates the next overload.",
		field: func(c *Config) any { return &c.Agent.ConsolidationHeadroom }},
	{section: "scheduler", name: "relief_headroom", kind: kindFloat, def: "0.4", bounds: "[0, 1)", unit: "fraction of the thresholds",
		help:  "A partition relieving an overload grows, up to relief_partition hosts and inside its host's availability zone, for destinations that keep this fraction of their demand limits free; past that size or zone any destination that fits. 0: the first that fits.",
		field: func(c *Config) any { return &c.Agent.ReliefHeadroom }},
	{section: "scheduler", name: "relief_partition", kind: kindInt, def: "12", bounds: ">= 2", unit: "hosts",
		help:  "See relief_headroom: the partition size from which any destination that fits will do.",
		field: func(c *Config) any { return &c.Agent.ReliefPartition }},
	{section: "scheduler", name: "debounce_k", kind: kindInt, def: "3", bounds: ">= 1", unit: "samples",
		help:  "An event fires when its condition holds for debounce_k of the last debounce_n samples.",
		field: func(c *Config) any { return &c.Agent.K }},
	{section: "scheduler", name: "debounce_n", kind: kindInt, def: "5", bounds: ">= 1", unit: "samples",
		help:  "See debounce_k; at least debounce_k.",
		field: func(c *Config) any { return &c.Agent.N }},
	{section: "scheduler", name: "partition_timeout", kind: kindSeconds, def: "3.5", bounds: "> 0",
		help:  "A member hearing nothing from its leader for this long dissolves the partition.",
		field: func(c *Config) any { return &c.Agent.PartitionTimeout }},
	{section: "scheduler", name: "snapshot_timeout", kind: kindSeconds, def: "1.5", bounds: "> 0",
		help:  "Members that send no snapshot within this time are dropped from the partition.",
		field: func(c *Config) any { return &c.Agent.SnapshotTimeout }},
	{section: "scheduler", name: "progress_timeout", kind: kindSeconds, def: "5", bounds: "> 0",
		help: "A leader whose request neither finds a node nor comes back within this time, plus hop_timeout per node " +
			"outside its partition, dissolves its partition (the request was lost).",
		field: func(c *Config) any { return &c.Agent.ProgressTimeout }},
	{section: "scheduler", name: "hop_timeout", kind: kindSeconds, def: "0.05", bounds: ">= 0",
		help: "See progress_timeout: a request crosses one busy partition per hop, so when most nodes are busy a tour " +
			"makes about as many hops as there are nodes.",
		field: func(c *Config) any { return &c.Agent.HopTimeout }},
	{section: "scheduler", name: "retry_backoff", kind: kindSeconds, def: "5", bounds: "> 0",
		help:  "An event its partition did not solve is raised again after this backoff, doubling up to max_retry_backoff (not after a plan refused as not worth its moves: move_cost).",
		field: func(c *Config) any { return &c.Agent.RetryBackoff }},
	{section: "scheduler", name: "max_retry_backoff", kind: kindSeconds, def: "60", bounds: "> 0",
		help:  "See retry_backoff; at least retry_backoff.",
		field: func(c *Config) any { return &c.Agent.MaxRetryBackoff }},
	{section: "scheduler", name: "solve_timeout", kind: kindSeconds, def: "0.2", bounds: "> 0",
		help:  "Hard time limit of the solver; it returns the best placement found so far.",
		field: func(c *Config) any { return &c.Agent.SolveTimeout }},
	{section: "scheduler", name: "next_node", kind: kindEnum, def: "ring", choices: []string{scheduler.NextRing, scheduler.NextVivaldi},
		help: "Where a partition grows next (DESIGN 5.3): ring (the ring successor) or vivaldi (the node closest to the partition's " +
			"initiator by Vivaldi coordinates first, so a partition fills its own site before it crosses a WAN; the ring while " +
			"coordinates have not converged and among nodes at the same distance).",
		field: func(c *Config) any { return &c.Agent.NextNode }},
	{section: "scheduler", name: "rtt_probe_interval", kind: kindSeconds, def: "1", bounds: ">= 0",
		help: "Period of the agent's RTT probes to a random member over NATS (a burst of three small messages, answered at once), " +
			"which feed its Vivaldi coordinate; four times as often until the coordinate settles. 0: no probes (the agent still answers). " +
			"Under [consensus] membership = swim the default is 0: memberlist's own probes measure the RTT and their acks carry " +
			"the member's coordinate; a value > 0 there makes these NATS probes the coordinate's only source instead (where NATS " +
			"and memberlist take different paths, as in devstack/testbed, which delays NATS only).",
		field: func(c *Config) any { return &c.Coord.Probe }},
	{section: "scheduler", name: "coordinate_max_error", kind: kindFloat, def: "0.75", bounds: "> 0", unit: "relative error",
		help: "A member's coordinate is used for distances once its own error estimate has been at or below this (it starts at 1.5), " +
			"and stays used if the estimate rises again; until then next_node vivaldi falls back on the ring for it.",
		field: func(c *Config) any { return &c.Coord.MaxError }},
	{section: "scheduler", name: "preempt", kind: kindBool, def: "false",
		help:  "Shelve (offload) the lowest-priority servers (metadata dvms:priority) when no placement exists.",
		field: func(c *Config) any { return &c.Agent.Preempt }},
	{section: "scheduler", name: "max_migrations_per_host", kind: kindInt, def: "1", bounds: ">= 1", unit: "migrations",
		help:  "Concurrent outgoing live migrations per host in a plan (Nova's max_concurrent_live_migrations is 1 by default).",
		field: func(c *Config) any { return &c.Agent.Limits.PerHost }},
	{section: "scheduler", name: "max_migrations_per_partition", kind: kindInt, def: "8", bounds: ">= 1", unit: "migrations",
		help:  "Concurrent live migrations per partition in a plan.",
		field: func(c *Config) any { return &c.Agent.Limits.PerPartition }},
	{section: "scheduler", name: "queued_migrations_per_host", kind: kindInt, def: "1", bounds: ">= 0", unit: "migrations",
		help: "Live migrations per source host handed to Nova beyond the one running (Nova queues them), " +
			"so a host's next migration starts the moment the previous one ends; 0 = one at a time.",
		field: func(c *Config) any { return &c.Runtime.Exec.QueuePerHost }},
	{section: "scheduler", name: "maintenance_actions", kind: kindString, def: "live_migrate",
		help: "What a drain does with a server whose flavor sets no dvms:maintenance_action (nor its metadata, with [nova] server_metadata_controls): " +
			"actions tried in turn, comma separated, from live_migrate, cold_migrate (openstack server migrate to the plan's destination, then confirm the resize), " +
			"shelve_offload and notify (leave the server on the host for its owner; the drain ends left_for_owners). " +
			"A later action is tried when Nova refuses or fails the one before. Overload and underload events only ever live-migrate.",
		field: func(c *Config) any { return &c.Runtime.Exec.MaintenanceActions }},
	{section: "scheduler", name: "migration_timeout", kind: kindSeconds, def: "600", bounds: "> 0",
		help:  "Give up following one action (live migration, shelve, unshelve) after this time.",
		field: func(c *Config) any { return &c.Runtime.Exec.MigrationTimeout }},
	{section: "scheduler", name: "poll_interval", kind: kindSeconds, def: "1", bounds: "> 0",
		help:  "Read an action's status from Nova every this often while following it.",
		field: func(c *Config) any { return &c.Runtime.Exec.Poll }},
	{section: "scheduler", name: "migration_completion_action", kind: kindEnum, def: "abort", choices: []string{"none", "abort", "force_complete", "force_complete_then_abort"},
		help: "What to do with a live migration that does not converge (see migration_stall_window and migration_completion_timeout). " +
			"abort: abort it (the server stays ACTIVE on its source; Nova's own live_migration_timeout_action default). " +
			"force_complete: force it to complete (post-copy where [libvirt] live_migration_permit_post_copy is set, else Nova pauses the guest until the copy ends). " +
			"force_complete_then_abort: force it, and abort it if it still runs migration_abort_after later. none: leave it to Nova. " +
			"The action's and the event's reason say force_completed or migration_aborted.",
		field: func(c *Config) any { return &c.Runtime.Exec.Completion.Action }},
	{section: "scheduler", name: "migration_stall_window", kind: kindSeconds, def: "90", bounds: "> 0",
		help: "A live migration whose remaining memory (Nova's memory_remaining_bytes) has not come down to a new low for this long does not converge. " +
			"Its progress is read once per poll_interval, in place of the status read (no extra Nova request).",
		field: func(c *Config) any { return &c.Runtime.Exec.Completion.StallWindow }},
	{section: "scheduler", name: "migration_completion_timeout", kind: kindSeconds, def: "100", bounds: "> 0",
		help: "Per GiB of the server's RAM: a live migration running longer than this for each GiB of its RAM (at least 2 GiB, as Nova's live_migration_completion_timeout) does not converge. " +
			"The limit is kept within half of migration_timeout.",
		field: func(c *Config) any { return &c.Runtime.Exec.Completion.TimeoutPerGiB }},
	{section: "scheduler", name: "migration_abort_after", kind: kindSeconds, def: "60", bounds: "> 0",
		help:  "With force_complete_then_abort: abort a forced live migration still running this long after it was forced.",
		field: func(c *Config) any { return &c.Runtime.Exec.Completion.AbortAfter }},
	{section: "scheduler", name: "migration_bandwidth", kind: kindFloat, def: "1000", bounds: "> 0", unit: "MB/s",
		help: "Live-migration bandwidth the planner assumes before it has seen a migration. It then learns each host pair's " +
			"(and the site-wide) bandwidth and each server's dirty rate from the migrations this agent followed, and avoids a " +
			"move predicted not to converge when another solution exists.",
		field: func(c *Config) any { return &c.Runtime.Estimate.BandwidthMBps }},
	{section: "scheduler", name: "migration_estimate_weight", kind: kindFloat, def: "0.3", bounds: "(0, 1]",
		help:  "Weight of the latest migration in the planner's moving averages of bandwidth and dirty rate.",
		field: func(c *Config) any { return &c.Runtime.Estimate.Weight }},
	{section: "scheduler", name: "recheck_timeout", kind: kindSeconds, def: "20", bounds: "> 0",
		help:  "Bound on the re-check of one action before it is sent (all its reads of Nova).",
		field: func(c *Config) any { return &c.Runtime.Exec.RecheckTimeout }},
	{section: "scheduler", name: "nova_unresponsive_after", kind: kindSeconds, def: "60", bounds: "> 0",
		help: "A followed action whose status reads all fail for this long ends as failed (outcome unknown, recorded), " +
			"so a hung Nova does not hold the partition for migration_timeout.",
		field: func(c *Config) any { return &c.Runtime.Exec.Unresponsive }},
	{section: "scheduler", name: "action_grant_validity", kind: kindSeconds, def: "5", bounds: "> 0",
		help: "Fencing: right before a plan's action is handed to Nova, its source host's agent grants it (only to the leader of the partition it is in), " +
			"and the action is sent within this time of asking or not at all. A leader cut off from the bus gets no grant and sends nothing; " +
			"an agent that gave up on its leader grants it nothing more, and follows the moves it granted in Nova to their end " +
			"(its host's servers re-read once per this interval, only then) before its host takes part in another plan.",
		field: func(c *Config) any { return &c.Runtime.Exec.GrantValidity }},
	{section: "scheduler", name: "advise_only", kind: kindBool, def: "false",
		help:  "Advise mode: compute, re-check and log plans, send nothing to Nova.",
		field: func(c *Config) any { return &c.Runtime.Exec.DryRun }},
	{section: "scheduler", name: "stop_grace", kind: kindSeconds, def: "120", bounds: ">= 0",
		help: "On SIGTERM, finish the plan being executed (or wait for this agent's partition to end) for at most this long. " +
			"Keep systemd's TimeoutStopSec above it.",
		field: func(c *Config) any { return &c.Runtime.StopGrace }},
	{section: "scheduler", name: "lead_timeout", kind: kindSeconds, def: "60", bounds: ">= 0",
		help: "Bounds on one key (a stolen key cannot hold the region): a key that leads a partition this agent is in for longer than this, " +
			"while it grows or is blocked, is refused for lead_window: the agent leaves the partition (its own event is raised again at once), " +
			"sends it no request and drops the requests and updates of partitions it leads. Keep it above progress_timeout plus hop_timeout per host. 0: no bound.",
		field: func(c *Config) any { return &c.Runtime.Bounds.LeadTimeout }},
	{section: "scheduler", name: "lead_plan_timeout", kind: kindSeconds, def: "1800", bounds: ">= 0",
		help:  "See lead_timeout: the same bound while the partition's plan runs (keep it above the longest plan). 0: no bound.",
		field: func(c *Config) any { return &c.Runtime.Bounds.LeadPlanTimeout }},
	{section: "scheduler", name: "max_leads", kind: kindInt, def: "100", bounds: ">= 0", unit: "partitions",
		help:  "See lead_timeout: a key that leads more partitions than this within lead_window, as this agent hears of them, is refused. 0: no bound.",
		field: func(c *Config) any { return &c.Runtime.Bounds.MaxLeads }},
	{section: "scheduler", name: "lead_window", kind: kindSeconds, def: "600", bounds: "> 0",
		help:  "See lead_timeout and max_leads: the window of max_leads, and how long a key past a bound is refused.",
		field: func(c *Config) any { return &c.Runtime.Bounds.LeadWindow }},
	{section: "scheduler", name: "sender_rate", kind: kindFloat, def: "100", bounds: ">= 0", unit: "messages per second",
		help: "Protocol messages one key may send this agent per second, beyond sender_burst; the rest are dropped, counted " +
			"(dvms_messages_bounded_total) and logged once per key every 10 s. 0: no bound.",
		field: func(c *Config) any { return &c.Runtime.Bounds.Rate }},
	{section: "scheduler", name: "sender_burst", kind: kindInt, def: "1000", bounds: ">= 1", unit: "messages",
		help:  "See sender_rate.",
		field: func(c *Config) any { return &c.Runtime.Bounds.Burst }},
	{section: "scheduler", name: "unshelve_interval", kind: kindSeconds, def: "30", bounds: ">= 0",
		help: "With preempt: every this often a free, enabled agent unshelves onto its own host the highest-priority server " +
			"dvms shelved (metadata dvms:shelved), if it fits below the overload thresholds minus unshelve_headroom. " +
			"A server dvms left SHELVED on this host (never offloaded) is unshelved in place when it fits, else offloaded. " +
			"Without preempt the agent still does this cleanup, at start and every 15 min; 0 disables both.",
		field: func(c *Config) any { return &c.UnshelveEvery }},
	{section: "scheduler", name: "unshelve_headroom", kind: kindFloat, def: "0.1", bounds: "[0, 1)", unit: "fraction of the thresholds",
		help:  "See unshelve_interval.",
		field: func(c *Config) any { return &c.UnshelveMargin }},

	{section: "monitor", name: "interval", kind: kindSeconds, def: "1", bounds: "> 0",
		help:  "Sampling interval of the host's demand, from the local source (no Nova request).",
		field: func(c *Config) any { return &c.Runtime.Monitor }},
	{section: "monitor", name: "refresh_interval", kind: kindSeconds, def: "60", bounds: "> 0",
		help: "Re-read the host's servers from Nova (one request) this often (±10 %); also at once after a partition " +
			"this agent was in ends. At least interval. " +
			"The cost at rest is one request per agent per interval: 10,000 agents at 60 s send 167 requests/s " +
			"(a region whose API serves 500 requests/s in all wants 300 or more).",
		field: func(c *Config) any { return &c.Runtime.Refresh }},
	{section: "monitor", name: "placement_refresh_interval", kind: kindSeconds, def: "600", bounds: "> 0",
		help: "Re-read the host's service, capacity and usage from Nova and placement (three requests) this often at rest (±10 %). " +
			"At least refresh_interval.",
		field: func(c *Config) any { return &c.Runtime.PlacementRefresh }},
	{section: "monitor", name: "service_watch_interval", kind: kindSeconds, def: "2", bounds: "> 0",
		help: "Period of the region's maintenance watch: one agent of the region lists the nova-compute services " +
			"and publishes their changes over NATS.",
		field: func(c *Config) any { return &c.Runtime.ServiceWatch }},
	{section: "monitor", name: "summary_interval", kind: kindSeconds, def: "30", bounds: ">= 0",
		help: "Publish a summary of the host (demand, capacity, maintenance, moves in flight) for dvms scheduler-api this often, " +
			"and at once when it changes (from the cached view: no Nova request). 0 = never; scheduler-api then knows no host.",
		field: func(c *Config) any { return &c.Summary.Interval }},
	{section: "monitor", name: "source", kind: kindEnum, def: "cgroup", choices: []string{"cgroup", "file", "prometheus", "nova-diagnostics"},
		help: "Demand source. cgroup: the libvirt guests' cgroup accounting on this host (cgroup v2, v1 or hybrid, with systemd or not: " +
			"found with no other setting; guests named by their Nova instance name). file: a file the operator or a test writes. " +
			"prometheus: instant queries. nova-diagnostics: Nova's server diagnostics, one listing plus one Nova request per server " +
			"per sample (a sample at most once a minute, so demand is up to a minute old): for small clouds only.",
		field: func(c *Config) any { return &c.MonitorSource }},
	{section: "monitor", name: "drain_reason_pattern", kind: kindRegexp, def: "^dvms:maintenance|^maintenance", required: true,
		help:  "A disabled nova-compute service whose disabled reason matches this regular expression is drained (MAINTENANCE).",
		field: func(c *Config) any { return &c.Runtime.DrainReason }},
	{section: "monitor", name: "file_path", kind: kindPath,
		help: "source = file: JSON {\"<server-id>\": {\"cpu\": cores, \"ram_mb\": MB}} or CSV server,cpu,ram_mb, " +
			"re-read every sample (e.g. /var/lib/dvms/demand.json).",
		field: func(c *Config) any { return &c.FilePath }},
	{section: "monitor", name: "cgroup_root", kind: kindPath, def: "/sys/fs/cgroup",
		help: "source = cgroup: where the cgroup hierarchies are mounted (v2 here, or v1 controllers and the hybrid unified mount " +
			"under it). The agent only reads it.",
		field: func(c *Config) any { return &c.CgroupRoot }},
	{section: "monitor", name: "prometheus_url", kind: kindHTTPURL,
		help:  "source = prometheus: the server's URL (e.g. http://127.0.0.1:9090).",
		field: func(c *Config) any { return &c.PromURL }},
	{section: "monitor", name: "prometheus_cpu_query", kind: kindString,
		help:  "source = prometheus: instant query returning each server's CPU demand in cores, one series per server.",
		field: func(c *Config) any { return &c.PromCPUQuery }},
	{section: "monitor", name: "prometheus_ram_query", kind: kindString,
		help:  "source = prometheus: instant query returning each server's RAM demand in MB, one series per server; optional.",
		field: func(c *Config) any { return &c.PromRAMQuery }},
	{section: "monitor", name: "prometheus_uuid_label", kind: kindString, def: "uuid",
		help:  "source = prometheus: the series label naming the server's UUID.",
		field: func(c *Config) any { return &c.PromUUIDLabel }},

	{section: "consensus", name: "arbiter", kind: kindEnum, def: "raft", choices: []string{"raft", "local"},
		help:  "Merge arbiter: raft, or local (one process decides alone: only for a single agent with --embedded-nats).",
		field: func(c *Config) any { return &c.Arbiter }},
	{section: "consensus", name: "voters", kind: kindInt, def: "3", choices: []string{"3", "5"}, unit: "agents",
		help:  "Voters of the region's Raft group.",
		field: func(c *Config) any { return &c.Voters }},
	{section: "consensus", name: "bind", kind: kindAddr, def: "0.0.0.0:7420",
		help: "TCP address this agent's Raft member listens on when it is chosen as a voter (port 0 picks one). " +
			"Voters talk Raft directly over TCP; requests and membership go over NATS.",
		field: func(c *Config) any { return &c.RaftBind }},
	{section: "consensus", name: "advertise", kind: kindAddr,
		help: "Address the other voters dial, advertised in heartbeats; empty = bind's address, or for a wildcard bind " +
			"the local address that routes to the NATS server.",
		field: func(c *Config) any { return &c.RaftAdvertise }},
	{section: "consensus", name: "membership", kind: kindEnum, def: "heartbeat", choices: []string{"heartbeat", "swim"},
		help: "How agents follow each other: heartbeat (every agent to every other over NATS each heartbeat_interval: " +
			"simple, O(N) messages per agent, for regions of up to a few hundred hosts), or swim (hashicorp/memberlist's " +
			"gossip failure detector with suspicion and Lifeguard, O(1) messages per agent; needs swim_bind open to the " +
			"other agents over TCP and UDP, and swim_key_file).",
		field: func(c *Config) any { return &c.Membership }},
	{section: "consensus", name: "swim_bind", kind: kindAddr, def: "0.0.0.0:7946",
		help:  "membership = swim: TCP and UDP address of the agent's memberlist.",
		field: func(c *Config) any { return &c.SwimBind }},
	{section: "consensus", name: "swim_advertise", kind: kindAddr,
		help: "membership = swim: the address the other agents dial; empty = swim_bind's address, or for a wildcard bind " +
			"the local address that routes to the NATS server, with swim_bind's port (as [consensus] advertise).",
		field: func(c *Config) any { return &c.SwimAdvertise }},
	{section: "consensus", name: "swim_seeds", kind: kindString,
		help: "membership = swim: host:port of agents to join through, comma separated (a few per site is enough; " +
			"the agent retries every second until one answers). Empty: this agent starts the region's membership.",
		field: func(c *Config) any { return &c.SwimSeeds }},
	{section: "consensus", name: "swim_key_file", kind: kindPath,
		help: "membership = swim: file holding the region's membership key, base64 of 16, 24 or 32 bytes " +
			"(openssl rand -base64 32); every membership message is encrypted and authenticated with it (AES-GCM), so only " +
			"key holders can join or report a member up or down. Required unless [DEFAULT] insecure_unsigned.",
		field: func(c *Config) any { return &c.SwimKeyFile }},
	{section: "consensus", name: "heartbeat_interval", kind: kindSeconds, def: "1", bounds: "> 0",
		help:  "Heartbeat period on NATS.",
		field: func(c *Config) any { return &c.Heartbeat }},
	{section: "consensus", name: "dead_after", kind: kindSeconds, def: "5", bounds: "> 0",
		help:  "A member silent for this long is dead. More than twice heartbeat_interval.",
		field: func(c *Config) any { return &c.DeadAfter }},

	{section: "scheduler_api", name: "listen", kind: kindAddr, def: "127.0.0.1:8095",
		help: "dvms scheduler-api: address of its HTTP service (POST /scheduler/nova/external, GET /healthz). " +
			"Summaries older than 3 x [monitor] summary_interval are stale: those hosts keep Nova's order.",
		field: func(c *Config) any { return &c.SchedAPIListen }},
	{section: "scheduler_api", name: "max_moves_in_flight", kind: kindInt, def: "0", bounds: ">= 0", unit: "moves",
		help:  "A host with more dvms moves in flight (in and out, planned or migrating) goes last.",
		field: func(c *Config) any { return &c.SchedAPI.MaxMoves }},
	{section: "scheduler_api", name: "nova_weight", kind: kindFloat, def: "0.5", bounds: ">= 0", unit: "fraction of capacity",
		help: "Weight of Nova's own weight (normalized to [0, 1] among the candidates) against the measured headroom " +
			"left after the flavor (a fraction of the host's capacity).",
		field: func(c *Config) any { return &c.SchedAPI.NovaWeight }},
	{section: "scheduler_api", name: "drop_avoided", kind: kindBool, def: "false",
		help: "Drop draining, disabled or busy hosts from the answer instead of putting them last " +
			"(never all candidates: dvms never fails a boot).",
		field: func(c *Config) any { return &c.SchedAPI.DropAvoided }},
	{section: "scheduler_api", name: "pending_ttl", kind: kindSeconds, def: "120", bounds: ">= 0",
		help: "A host put first for a boot by an authenticated caller (token_file) counts the flavor for this long " +
			"(until its agent's summary shows the server), so bursts spread.",
		field: func(c *Config) any { return &c.SchedAPI.PendingTTL }},
	{section: "scheduler_api", name: "token_file", kind: kindPath,
		help: "File whose first line is the token Nova's weigher sends (Authorization: Bearer TOKEN; its [dvms] token_file names the same file); " +
			"at least 16 characters, e.g. `openssl rand -hex 32`, and not readable by others (mode 0640, group of nova and dvms). " +
			"A call without it gets 401 and Nova keeps its order. Empty: every caller is answered but none is trusted: " +
			"no boot is counted as pending (pending_ttl), since anyone reaching the port could steer later boots with it.",
		field: func(c *Config) any { return &c.SchedAPIHTTP.TokenFile }},
	{section: "scheduler_api", name: "body_timeout", kind: kindSeconds, def: "10", bounds: "> 0",
		help:  "A request must arrive whole (header and body) within this long, and its answer leave within it; a slower connection is closed.",
		field: func(c *Config) any { return &c.SchedAPIHTTP.BodyTimeout }},
	{section: "scheduler_api", name: "idle_timeout", kind: kindSeconds, def: "60", bounds: "> 0",
		help:  "A keep-alive connection with no request for this long is closed.",
		field: func(c *Config) any { return &c.SchedAPIHTTP.IdleTimeout }},
	{section: "scheduler_api", name: "max_requests_per_client", kind: kindInt, def: "16", bounds: ">= 1", unit: "requests",
		help: "Requests of one client address in progress at once (nova-scheduler asks once per boot per worker); " +
			"more get 429 at once and Nova keeps its order for them. The service takes 256 at most in all.",
		field: func(c *Config) any { return &c.SchedAPIHTTP.MaxPerClient }},

	{section: "operator", name: "nats_url", kind: kindNATSURLs,
		help: "The operator commands (dvms status, events, plans, pause, resume, mode, exclude, include, drain): NATS server URL(s) " +
			"of the agents, comma separated. Empty: [nats] url when set. These commands read /etc/dvms/dvms.conf (--config) for " +
			"this section; their flags and environment variables (--nats-url, DVMS_NATS_URL) override it.",
		field: func(c *Config) any { return &c.Operator.NATSURL }},
	{section: "operator", name: "creds_file", kind: kindPath,
		help:  "The operator commands: NATS credentials file (--nats-creds), optional.",
		field: func(c *Config) any { return &c.Operator.CredsFile }},
	{section: "operator", name: "nkey_seed", kind: kindPath,
		help: "The operator commands: authenticate to NATS with this nkeys seed file (--nats-nkey): a key of " +
			"`dvms nats-config --observer` (or --reader for status, events and plans only). Never the agent's own key.",
		field: func(c *Config) any { return &c.Operator.NkeySeed }},
	{section: "operator", name: "tls_ca", kind: kindPath,
		help:  "The operator commands: CA bundle of a NATS server that speaks TLS (--nats-ca). Empty: [nats] tls_ca.",
		field: func(c *Config) any { return &c.Operator.TLSCA }},
	{section: "operator", name: "signing_key", kind: kindPath,
		help: "The operator commands: the operator's private key NAME.key (`dvms keygen`; --key) that signs the run-time " +
			"commands (pause, resume, mode, exclude, include); its NAME.pub goes in every agent's keys_dir/operators. " +
			"Keep it readable by the operators only (mode 0600 or 0640).",
		field: func(c *Config) any { return &c.Operator.SigningKey }},
	{section: "operator", name: "keys_dir", kind: kindPath,
		help: "The operator commands that read the agents' answers (dvms status, events, plans): the region's keys directory " +
			"(the agents' HOST.pub; --keys-dir). An answer is then taken only when it is signed, for that request, by the key of the host " +
			"it reports on; any other is dropped and named on stderr, so one stolen agent key cannot pose as every agent. " +
			"Empty: [DEFAULT] keys_dir when set, else the answers are taken unverified.",
		field: func(c *Config) any { return &c.Operator.KeysDir }},
	{section: "operator", name: "region", kind: kindName,
		help:  "The operator commands: the agents' region (--region). Empty: [DEFAULT] region when set, else RegionOne.",
		field: func(c *Config) any { return &c.Operator.Region }},
}

// lookupOption returns the row of [section] name, or nil.
func LookupOption(section, name string) *Option {
	for i := range Options {
		if Options[i].section == section && Options[i].name == name {
			return &Options[i]
		}
	}
	return nil
}

// EnvName is the environment variable that overrides o.
func (o *Option) EnvName() string {
	if o.section == "DEFAULT" {
		return "DVMS_" + strings.ToUpper(o.name)
	}
	return "DVMS_" + strings.ToUpper(o.section+"_"+o.name)
}

// Section is the [section] of o.
func (o *Option) Section() string { return o.section }

// Name is o's name in its section.
func (o *Option) Name() string { return o.name }

// Flag is the flag of `dvms agent` that overrides o ("" = none).
func (o *Option) Flag() string { return o.flag }

// Help is o's help text, as the sample shows it.
func (o *Option) Help() string { return o.help }

// Placeholder is the word --help shows for the value of o's flag.
func (o *Option) Placeholder() string {
	switch o.kind {
	case kindNATSURLs, kindHTTPURL:
		return "URL"
	case kindPath:
		return "FILE"
	case kindAddr:
		return "HOST:PORT"
	case kindSeconds:
		return "SECONDS"
	case kindInt:
		return "N"
	case kindFloat:
		return "X"
	case kindBool:
		return "BOOL"
	}
	_, last, _ := strings.Cut(o.name, "_")
	if last == "" {
		last = o.name
	}
	return strings.ToUpper(last)
}
