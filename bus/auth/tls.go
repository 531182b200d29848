package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Mutual TLS with the region's keys. Each agent presents a self-signed
// certificate made at start from its own host key (ed25519), its common
// name the host; the other side accepts it when the keyring holds that
// very key for that host. The keyring is the only trust anchor — the
// same one the signed messages use — so raft needs no CA of its own and
// nothing more to provision than `dvms keygen` already does.

// ErrPeer is returned when a TLS peer is not a ring member, or not the
// member expected.
var ErrPeer = errors.New("auth: tls peer refused")

// PeerTLS builds TLS configurations that authenticate both ends by the
// keyring. Safe for concurrent use.
type PeerTLS struct {
	host string
	cert tls.Certificate
	ring *Keyring
}

// NewPeerTLS makes s's certificate (valid for a year from an hour ago:
// it is pinned by key, the dates only have to satisfy TLS libraries).
func NewPeerTLS(s *Signer, ring *Keyring) (*PeerTLS, error) {
	if s == nil || ring == nil {
		return nil, errors.New("auth: peer tls needs a signer and a keyring")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("auth: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.host},
		DNSNames:     []string{s.host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.pub, s.priv)
	if err != nil {
		return nil, fmt.Errorf("auth: certificate of %s: %w", s.host, err)
	}
	return &PeerTLS{host: s.host, ring: ring, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: s.priv}}, nil
}

// Host is the host this side presents itself as.
func (p *PeerTLS) Host() string { return p.host }

// PeerHost checks a presented chain: one certificate whose common name
// is a ring member and whose key is that member's. It returns the host.
func (p *PeerTLS) PeerHost(raw [][]byte) (string, error) {
	if len(raw) == 0 {
		return "", fmt.Errorf("%w: no certificate", ErrPeer)
	}
	c, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return "", fmt.Errorf("%w: certificate: %v", ErrPeer, err)
	}
	host := c.Subject.CommonName
	want, ok := p.ring.keys[host]
	if !ok {
		return "", fmt.Errorf("%w: %q is not a ring member", ErrPeer, host)
	}
	got, ok := c.PublicKey.(ed25519.PublicKey)
	if !ok || !want.Equal(got) {
		return "", fmt.Errorf("%w: certificate of %q does not carry its ring key", ErrPeer, host)
	}
	// Self-signed by that key: proves nothing more than the handshake's
	// own signature does, but refuses a certificate someone else signed.
	if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
		return "", fmt.Errorf("%w: certificate of %q: %v", ErrPeer, host, err)
	}
	return host, nil
}

// base is the configuration both sides share: TLS 1.3, this side's
// certificate, and the keyring check instead of a CA chain (the standard
// verification is off because nothing is signed by a CA; PeerHost is the
// verification).
func (p *PeerTLS) base(check func(host string) error) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{p.cert},
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyPeerCertificate against the keyring
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			host, err := p.PeerHost(raw)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(host); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrPeer, host, err)
				}
			}
			return nil
		},
	}
}

// Server is the listening side's configuration: the client must present
// a ring member's certificate, which allow (nil: any member) accepts.
func (p *PeerTLS) Server(allow func(host string) error) *tls.Config {
	c := p.base(allow)
	c.ClientAuth = tls.RequireAnyClientCert
	return c
}

// Client is the dialing side's configuration: the server must present
// expect's certificate ("" = any ring member).
func (p *PeerTLS) Client(expect string) *tls.Config {
	return p.base(func(host string) error {
		if expect != "" && host != expect {
			return fmt.Errorf("dialed %s", expect)
		}
		return nil
	})
}

// ConnHost is the authenticated peer of a completed handshake.
func ConnHost(c *tls.Conn) string {
	st := c.ConnectionState()
	if !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}
