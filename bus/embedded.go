package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an in-process NATS server.
type EmbeddedConfig struct {
	Host string // default 127.0.0.1
	Port int    // -1 picks a free port
	// MaxPayload in bytes (default 8 MiB: snapshots of big hosts).
	MaxPayload int32
	// Users, if any, are the only clients allowed to connect, each with
	// its nkey and subject permissions (see AgentPermissions).
	Users []User
}

// Embedded is a NATS server running in this process, for `dvms simulate`,
// one-host trials (`dvms agent --embedded-nats`) and tests.
type Embedded struct {
	cfg EmbeddedConfig
	srv *server.Server
}

// StartEmbedded starts a server and waits until it accepts connections.
func StartEmbedded(c EmbeddedConfig) (*Embedded, error) {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = 8 << 20
	}
	e := &Embedded{cfg: c}
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Embedded) start() error {
	opts := &server.Options{
		Host: e.cfg.Host, Port: e.cfg.Port, NoLog: true, NoSigs: true,
		MaxPayload: e.cfg.MaxPayload, MaxPending: 256 << 20, WriteDeadline: 10 * time.Second,
	}
	for _, u := range e.cfg.Users {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.Nkey, Permissions: &server.Permissions{
			Publish:   serverPerm(u.Perms.Publish),
			Subscribe: serverPerm(u.Perms.Subscribe),
		}})
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("embedded nats: not ready after 10s")
	}
	e.srv = srv
	// Keep the port: a restart comes back on the same address.
	if addr := srv.Addr(); addr != nil {
		if p := portOf(addr.String()); p > 0 {
			e.cfg.Port = p
		}
	}
	return nil
}

// serverPerm is an allow list as nats-server takes it: an empty one
// denies everything (nats-server reads no allow list as no limit).
func serverPerm(allow []string) *server.SubjectPermission {
	if len(allow) == 0 {
		return &server.SubjectPermission{Deny: []string{">"}}
	}
	return &server.SubjectPermission{Allow: allow}
}

func portOf(addr string) int {
	var p int
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			_, _ = fmt.Sscanf(addr[i+1:], "%d", &p)
			break
		}
	}
	return p
}

// ClientURL is the URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
}

// Restart stops the server and starts it again on the same address
// (tests of reconnection).
func (e *Embedded) Restart() error {
	e.Shutdown()
	return e.start()
}
