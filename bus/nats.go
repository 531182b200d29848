package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/dvms-project/dvms/internal/backoff"
)

// Config connects to a NATS server or cluster.
type Config struct {
	// URL is one or more server URLs, comma separated.
	URL string
	// Name identifies the connection in the server's monitoring.
	Name string
	// CredsFile is a NATS credentials file (JWT + nkey seed), optional.
	CredsFile string
	// NkeySeedFile authenticates with an nkeys user seed, optional (an
	// agent uses its own message key: see AgentPermissions).
	NkeySeedFile string
	// TLS: CA bundle, client certificate and key, optional.
	TLSCA, TLSCert, TLSKey string
	// ReconnectWait between reconnection attempts; MaxReconnects -1 is forever.
	ReconnectWait time.Duration
	MaxReconnects int
	// ReconnectWaitMax, when above ReconnectWait, makes the wait grow:
	// it doubles from ReconnectWait after each failed round of the
	// servers, up to ReconnectWaitMax, with jitter (internal/backoff).
	ReconnectWaitMax time.Duration
	// RetryOnFailedConnect: ConnectNATS does not fail when no server
	// answers; the connection keeps trying in the background as it does
	// after a disconnection (see WaitConnected). Errors of the
	// configuration (an unreadable nkey seed) still fail at once.
	RetryOnFailedConnect bool
	// OnStateChange, if set, is told of disconnections and reconnections
	// (the package does not log).
	OnStateChange func(event string, err error)
}

// DefaultConfig reconnects forever every 500 ms.
func DefaultConfig() Config {
	return Config{URL: nats.DefaultURL, Name: "dvms", ReconnectWait: 500 * time.Millisecond, MaxReconnects: -1}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("nats: url is required"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("nats: tls_cert and tls_key go together"))
	}
	if c.CredsFile != "" && c.NkeySeedFile != "" {
		errs = append(errs, errors.New("nats: creds_file and nkey_seed are two ways to authenticate: choose one"))
	}
	if c.ReconnectWait < 0 {
		errs = append(errs, errors.New("nats: reconnect wait must be >= 0"))
	}
	return errors.Join(errs...)
}

// NATS is a Transport on a NATS connection. One connection can serve many
// agents of one process (the simulator shares one).
type NATS struct {
	nc *nats.Conn
	// up is closed once the connection is first established (at once
	// unless Config.RetryOnFailedConnect and no server answered).
	up chan struct{}
	// inbox starts this connection's request inboxes (InboxFor).
	inbox string
}

// Inbox is the prefix of this connection's request inboxes: InboxPrefix,
// then the nkeys public key it authenticates with, if any (the NATS
// permissions of such a client allow only its own key's inboxes).
func (n *NATS) Inbox() string { return n.inbox }

// InboxFor is the inbox prefix of requests sent over t (a *NATS, or a
// transport wrapping one that says its Inbox); InboxPrefix otherwise.
func InboxFor(t Transport) string {
	if i, ok := t.(interface{ Inbox() string }); ok {
		return i.Inbox()
	}
	return InboxPrefix
}

// seedPublicKey is the public key of an nkeys seed file.
func seedPublicKey(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// ConnectNATS connects; it fails if the first connection fails, unless
// c.RetryOnFailedConnect.
func ConnectNATS(ctx context.Context, c Config) (*NATS, error) {
	if c.ReconnectWait == 0 && c.MaxReconnects == 0 {
		d := DefaultConfig()
		c.ReconnectWait, c.MaxReconnects = d.ReconnectWait, d.MaxReconnects
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	n := &NATS{up: make(chan struct{}), inbox: InboxPrefix}
	var upOnce sync.Once
	markUp := func(*nats.Conn) { upOnce.Do(func() { close(n.up) }) }
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.ReconnectWait(c.ReconnectWait),
		nats.MaxReconnects(c.MaxReconnects),
		nats.RetryOnFailedConnect(c.RetryOnFailedConnect),
		nats.ReconnectBufSize(16 << 20),
		// Slow consumers drop messages (the protocol tolerates loss)
		// rather than stall the connection.
		nats.SyncQueueLen(65536),
	}
	if c.ReconnectWaitMax > c.ReconnectWait {
		p := backoff.Policy{Base: c.ReconnectWait, Max: c.ReconnectWaitMax}
		opts = append(opts, nats.CustomReconnectDelay(p.Delay))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey %s: %w", c.NkeySeedFile, err)
		}
		opts = append(opts, o)
		pub, err := seedPublicKey(c.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey %s: %w", c.NkeySeedFile, err)
		}
		n.inbox = InboxPrefix + pub + "."
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	cb := c.OnStateChange
	if cb == nil {
		// Without a callback, asynchronous errors are dropped: nats.go
		// would otherwise write them to stderr, outside the process's
		// structured logs.
		cb = func(string, error) {}
	}
	opts = append(opts,
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { cb("disconnected", err) }),
		nats.ConnectHandler(markUp),
		nats.ReconnectHandler(func(c *nats.Conn) { markUp(c); cb("reconnected", nil) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { cb("connect failed", err) }),
		nats.ClosedHandler(func(*nats.Conn) { cb("closed", nil) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { cb("error", err) }),
	)
	if dl, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(dl)))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", RedactURLs(c.URL), err)
	}
	n.nc = nc
	if nc.IsConnected() {
		markUp(nc)
	}
	return n, nil
}

// WaitConnected returns once the connection has been established (at
// once if it has), or with ctx's error.
func (n *NATS) WaitConnected(ctx context.Context) error {
	select {
	case <-n.up:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("nats: not connected: %w", ctx.Err())
	}
}

// Publish implements Transport. While reconnecting, messages are buffered
// by the client (up to 16 MiB) and sent on reconnection.
func (n *NATS) Publish(_ context.Context, subject string, data []byte) error {
	if err := n.nc.Publish(subject, data); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return ErrClosed
		}
		return fmt.Errorf("nats publish %s: %w", subject, err)
	}
	return nil
}

type natsSub struct{ s *nats.Subscription }

func (s natsSub) Unsubscribe() error {
	if err := s.s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return err
	}
	return nil
}

// Subscribe implements Transport: one delivery goroutine per subscription
// (nats.go's), messages in order of arrival.
func (n *NATS) Subscribe(subject string, h Handler) (Subscription, error) {
	s, err := n.nc.Subscribe(subject, func(m *nats.Msg) { h(m.Subject, m.Data) })
	if err != nil {
		return nil, fmt.Errorf("nats subscribe %s: %w", subject, err)
	}
	// Generous pending limits: a burst to a busy agent is buffered, beyond
	// that dropped (and counted by the server as a slow consumer).
	_ = s.SetPendingLimits(65536, 64<<20)
	return natsSub{s}, nil
}

// Flush waits until the server has processed everything sent so far.
func (n *NATS) Flush(ctx context.Context) error { return n.nc.FlushWithContext(ctx) }

// Connected reports whether the connection is up.
func (n *NATS) Connected() bool { return n.nc.IsConnected() }

// Close drains subscriptions and closes the connection.
func (n *NATS) Close() error {
	if n.nc.IsClosed() {
		return nil
	}
	if err := n.nc.Drain(); err != nil {
		n.nc.Close()
	}
	return nil
}

var _ Transport = (*NATS)(nil)

// RedactURLs returns comma-separated server URLs with any password
// replaced by "xxxxx" (url.URL.Redacted), for logs and errors; an entry
// that does not parse is replaced whole when it may hold credentials.
func RedactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err != nil && strings.Contains(p, "@"):
			parts[i] = "(unparsable URL with credentials)"
		case err == nil && u.User != nil:
			if _, has := u.User.Password(); !has {
				// A lone user part may be a token: hide it too.
				u.User = url.User("xxxxx")
			}
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
