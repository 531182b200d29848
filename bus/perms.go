package bus

import (
	"fmt"
	"slices"
	"strings"
)

// NATS-level authentication and subject permissions (issue 10). Each
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

// arbiterSubjects are the merge arbiter's request and reply subjects
// (consensus.RequestSubject and consensus.ReplySubject + "." + token;
// consensus checks that they stay inside this).
func arbiterSubjects(region string) []string {
	return []string{"dvms." + region + ".arbiter.req", "dvms." + region + ".arbiter.reply.*"}
}

// InboxPrefix starts the reply subject of a CLI or service request
// (`dvms status`): "_INBOX.dvms." + random token.
const InboxPrefix = "_INBOX.dvms."

// AgentPermissions are what the agent of host needs in region.
func AgentPermissions(region, host string) Permissions {
	all := "*"
	p := Permissions{
		Publish: []string{
			AgentSubject(region, all), // protocol messages to any agent
			HeartbeatSubject(region),
			EventsSubject(region),
			ServiceSubject(region, all), // the maintenance watch speaks for every host (a hint, re-read from Nova)
			ShelvedSubject(region),
			DemandSubject(region, all), // queries to any agent
			ReplySubject(region, all),  // answers to any asker
			SummarySubject(region, host),
			InboxPrefix + all,           // answers to `dvms status` and to operators' controls
			ControlStateSubject(region), // controls passed on to agents that missed them
			PingSubject(region, all),    // RTT probes (Vivaldi coordinates) to any agent
			PongSubject(region, all),    // and their answers
		},
		Subscribe: []string{
			AgentSubject(region, host),
			HeartbeatSubject(region),
			ServiceSubject(region, host),
			ShelvedSubject(region),
			DemandSubject(region, host),
			ReplySubject(region, host),
			StatusSubject(region),
			ControlSubject(region),
			ControlStateSubject(region),
			PingSubject(region, host),
			PongSubject(region, host),
		},
	}
	p.Publish = append(p.Publish, arbiterSubjects(region)...)
	p.Subscribe = append(p.Subscribe, arbiterSubjects(region)...)
	return p
}

// ObserverPermissions are what the operator's tools need in region: `dvms
// status`, `events` and `plans` (ask on the status subject, read answers
// in their own inbox and the events stream), `dvms drain`'s notice, the
// run-time controls (`dvms pause`, `mode`, `exclude`: the agents act on
// one only when an operator key of theirs signed it), and `dvms
// scheduler-api` (reads every host's summary). None of these can speak
// as an agent: the agents drop what an unlisted key signs.
func ObserverPermissions(region string) Permissions {
	return Permissions{
		Publish:   []string{StatusSubject(region), ServiceSubject(region, "*"), ControlSubject(region)},
		Subscribe: []string{InboxPrefix + "*", EventsSubject(region), SummarySubject(region, "*")},
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
		fmt.Fprintf(&b, "    # %s\n    { nkey: %q, permissions: { publish: { allow: %s }, subscribe: { allow: %s } } }\n",
			u.Name, u.Nkey, quoteList(u.Perms.Publish), quoteList(u.Perms.Subscribe))
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
