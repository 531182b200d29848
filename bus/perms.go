package bus

import (
	"fmt"
	"slices"
	"strings"
)

// NATS-level authentication and subject permissions. Each
// agent connects to NATS as the nkeys user of its own message key, and
// the server lets it publish and subscribe only where its role needs:
// it reads its own inbox subjects and the region's broadcasts, and
// publishes the host summary of its own host only. A client without a
// listed key cannot connect at all. The signed envelopes (bus/auth) stay
// the proof of who sent a message; the permissions keep non-members off
// the bus and a stolen key off other hosts' subjects and inboxes.

// Permissions are the subjects a NATS user may publish to and subscribe
// to (NATS wildcards).
type Permissions struct {
	Publish, Subscribe []string
}

// The arbiter's subjects (consensus.RequestSubject, and
// consensus.ReplySubject + "." + host + "." + token: each agent reads
// answers under its own host only; consensus checks that its subjects
// stay inside these).
func arbiterRequest(region string) string { return "dvms." + region + ".arbiter.req" }
func arbiterReplies(region, host string) string {
	return "dvms." + region + ".arbiter.reply." + host + ".*"
}

// InboxPrefix starts the reply subject of a CLI or service request
// (`dvms status`): "_INBOX.dvms." + [the client's nkey public key + "."]
// + random token (InboxFor). A client with an nkey reads only the inbox
// of its own key.
const InboxPrefix = "_INBOX.dvms."

// anyHost matches a host name in a subject: host names may hold dots, so
// one token ("*") is not enough.
const anyHost = ">"

// AgentPermissions are what the agent of host needs in region. It reads
// only what is addressed to host or to every agent; it publishes to any
// agent (protocol messages, queries and their answers, RTT probes: any
// agent may lead a partition or the arbiter group) but the host summary
// of its own host only.
func AgentPermissions(region, host string) Permissions {
	return Permissions{
		Publish: []string{
			AgentSubject(region, anyHost), // protocol messages to any agent
			HeartbeatSubject(region),
			EventsSubject(region),
			ServiceSubject(region, anyHost), // the maintenance watch speaks for every host (a hint, re-read from Nova)
			ShelvedSubject(region),
			DemandSubject(region, anyHost), // queries to any agent
			ReplySubject(region, anyHost),  // answers to any asker
			SummarySubject(region, host),
			InboxPrefix + anyHost,        // answers to `dvms status` and to operators' controls
			ControlStateSubject(region),  // controls passed on to agents that missed them (signed by an operator)
			PingSubject(region, anyHost), // RTT probes (Vivaldi coordinates) to any agent
			PongSubject(region, anyHost), // and their answers
			arbiterRequest(region),
			"dvms." + region + ".arbiter.reply." + anyHost, // the arbiter's leader answers any agent
		},
		Subscribe: []string{
			AgentSubject(region, host),
			HeartbeatSubject(region),
			ServiceSubject(region, host),
			ShelvedSubject(region),
			DemandSubject(region, host),
			ReplySubject(region, host),
			StatusSubject(region),
			ControlSubject(region), // the operators' commands: the agent obeys them
			ControlStateSubject(region),
			PingSubject(region, host),
			PongSubject(region, host),
			arbiterRequest(region),
			arbiterReplies(region, host),
		},
	}
}

// ReaderPermissions are what read-only tools need in region: `dvms
// status`, `events` and `plans` ask on the status subject and read the
// answers in the inbox of their own key (pub, its nkeys public key), and
// the events stream.
func ReaderPermissions(region, pub string) Permissions {
	return Permissions{
		Publish:   []string{StatusSubject(region)},
		Subscribe: []string{InboxPrefix + pub + ".*", EventsSubject(region)},
	}
}

// SchedulerAPIPermissions are what `dvms scheduler-api` needs: every
// host's summary, nothing else.
func SchedulerAPIPermissions(region string) Permissions {
	return Permissions{Subscribe: []string{SummarySubject(region, anyHost)}}
}

// ObserverPermissions are what the operator's tools need in region
// (pub: the key's nkeys public key): what ReaderPermissions allow, `dvms
// drain`'s notice, the run-time controls (`dvms pause`, `mode`,
// `exclude`: the agents act on one only when an operator key of theirs
// signed it), and what SchedulerAPIPermissions allow (one key may serve
// both). None of these can speak as an agent: the agents drop what an
// unlisted key signs.
func ObserverPermissions(region, pub string) Permissions {
	r, a := ReaderPermissions(region, pub), SchedulerAPIPermissions(region)
	return Permissions{
		Publish:   append(r.Publish, ServiceSubject(region, anyHost), ControlSubject(region)),
		Subscribe: append(r.Subscribe, a.Subscribe...),
	}
}

// Allows reports whether subject matches one of patterns (Match).
func Allows(patterns []string, subject string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return Match(p, subject) })
}

// User is one NATS user: a name for the reader, its nkeys public user key
// ("U…") and its permissions.
type User struct {
	Name  string
	Nkey  string
	Perms Permissions
}

// ServerConfig is what `dvms nats-config` writes: the parts of a
// nats-server configuration file that make the bus authenticated.
type ServerConfig struct {
	Listen string // host:port
	Users  []User
	// TLS: the server's certificate and key (clients then need tls_ca).
	TLSCert, TLSKey string
}

// Render writes the configuration in nats-server's file syntax.
func (c ServerConfig) Render() string {
	var b strings.Builder
	b.WriteString("# nats-server configuration written by `dvms nats-config`: every client\n")
	b.WriteString("# authenticates with an nkey; each user may use only the subjects listed.\n")
	if c.Listen != "" {
		fmt.Fprintf(&b, "listen: %q\n", c.Listen)
	}
	if c.TLSCert != "" {
		fmt.Fprintf(&b, "tls {\n  cert_file: %q\n  key_file: %q\n}\n", c.TLSCert, c.TLSKey)
	}
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range c.Users {
		fmt.Fprintf(&b, "    # %s\n    { nkey: %q, permissions: { publish: %s, subscribe: %s } }\n",
			u.Name, u.Nkey, renderPerm(u.Perms.Publish), renderPerm(u.Perms.Subscribe))
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// renderPerm is an allow list in nats-server's syntax; an empty one
// denies everything (nats-server reads no allow list as no limit).
func renderPerm(allow []string) string {
	if len(allow) == 0 {
		return `{ deny: [">"] }`
	}
	return "{ allow: " + quoteList(allow) + " }"
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
