package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// The envelope (version 1), all integers big-endian:
//
//	magic   4 bytes  "dvE1"
//	hostLen 1 byte   length of host, 1..255
//	host    hostLen  the sender's host name (ValidHost)
//	time    8 bytes  signing time, Unix nanoseconds
//	nonce   16 bytes the signer's random epoch (8) and a counter (8)
//	payload rest     the message, opaque
//	sig     64 bytes ed25519 signature
//
// The signature covers a domain label, the NATS subject the envelope was
// published on and every byte before the signature:
//
//	"dvms-envelope-v1\x00" || subject || "\x00" || envelope[:len-64]
//
// so an envelope cannot be replayed on another subject (another agent's,
// or from heartbeats to requests); the nonce with the time bounds replays
// on the same subject (Verifier).
const (
	magic     = "dvE1"
	nonceLen  = 16
	overhead  = len(magic) + 1 + 8 + nonceLen + ed25519.SignatureSize // + host
	domainSep = "dvms-envelope-v1\x00"
)

// Reasons a received message is dropped.
const (
	DropMalformed = "malformed"      // not an envelope (e.g. unsigned)
	DropUnknown   = "unknown-sender" // no key for the host it names
	DropSignature = "bad-signature"  // does not verify against that key
	DropStale     = "stale"          // its time is outside the window
	DropReplay    = "replayed"       // its nonce was seen within the window
)

type nonce [nonceLen]byte

// sealer holds a signer's nonce state.
type sealer struct {
	s     *Signer
	epoch [8]byte
	ctr   atomic.Uint64
}

func newSealer(s *Signer) *sealer {
	se := &sealer{s: s}
	_, _ = rand.Read(se.epoch[:])
	return se
}

// seal wraps payload for subject at now.
func (se *sealer) seal(subject string, payload []byte, now time.Time) []byte {
	h := se.s.host
	n := len(h)
	out := make([]byte, 0, overhead+n+len(payload))
	out = append(out, magic...)
	out = append(out, byte(n))
	out = append(out, h...)
	out = binary.BigEndian.AppendUint64(out, uint64(now.UnixNano()))
	out = append(out, se.epoch[:]...)
	out = binary.BigEndian.AppendUint64(out, se.ctr.Add(1))
	out = append(out, payload...)
	sig := ed25519.Sign(se.s.priv, signedBytes(subject, out))
	return append(out, sig...)
}

func signedBytes(subject string, body []byte) []byte {
	b := make([]byte, 0, len(domainSep)+len(subject)+1+len(body))
	b = append(b, domainSep...)
	b = append(b, subject...)
	b = append(b, 0)
	return append(b, body...)
}

// opened is a parsed envelope.
type opened struct {
	host    string
	at      time.Time
	nonce   nonce
	payload []byte
	body    []byte // everything signed after the subject
	sig     []byte
}

var errEnvelope = errors.New("not a v1 envelope")

func parse(data []byte) (opened, error) {
	var o opened
	if len(data) < overhead+1 || string(data[:len(magic)]) != magic {
		return o, errEnvelope
	}
	n := int(data[len(magic)])
	if n == 0 || len(data) < overhead+n {
		return o, errEnvelope
	}
	i := len(magic) + 1
	o.host = string(data[i : i+n])
	i += n
	o.at = time.Unix(0, int64(binary.BigEndian.Uint64(data[i:])))
	i += 8
	copy(o.nonce[:], data[i:i+nonceLen])
	i += nonceLen
	end := len(data) - ed25519.SignatureSize
	o.payload, o.body, o.sig = data[i:end], data[:end], data[end:]
	if !ValidHost(o.host) {
		return o, fmt.Errorf("sender %q", o.host)
	}
	return o, nil
}

// Verified is an envelope whose signature holds.
type Verified struct {
	Host    string    // the signer, as the keyring names it
	At      time.Time // signing time, the signer's clock
	Payload []byte
	nonce   nonce
}

// Verify checks that data is an envelope signed for subject by the key
// the keyring has for the host it names; reason (a Drop* constant) is ""
// when it is. Unlike a Transport it checks neither freshness nor
// replays: it is for signed records kept and passed on (an operator's
// command that agents re-publish to a peer that missed it), whose order
// the caller decides; v.Host is set whenever the envelope parses.
func (k *Keyring) Verify(subject string, data []byte) (v Verified, reason string) {
	o, err := parse(data)
	if err != nil {
		return v, DropMalformed
	}
	v.Host = o.host
	pub, ok := k.keys[o.host]
	if !ok {
		return v, DropUnknown
	}
	if !ed25519.Verify(pub, signedBytes(subject, o.body), o.sig) {
		return v, DropSignature
	}
	v.At, v.Payload, v.nonce = o.at, o.payload, o.nonce
	return v, ""
}

// Unverified returns the signer an envelope names and its payload
// without checking anything: only to answer or log about a message that
// was refused, never to act on it.
func Unverified(data []byte) (host string, payload []byte, ok bool) {
	o, err := parse(data)
	if err != nil {
		return "", nil, false
	}
	return o.host, o.payload, true
}

// Seal signs payload for subject at now as s: an envelope any holder of
// s's public key can verify, for a one-off publisher (the operator's
// commands) that needs no Transport.
func (s *Signer) Seal(subject string, payload []byte, now time.Time) []byte {
	return newSealer(s).seal(subject, payload, now)
}

// SignDetached signs msg for purpose as s: a bare ed25519 signature (64
// bytes) over purpose, s's host and msg, for records that name their
// signer elsewhere and have no room for an envelope (SWIM metadata).
func (s *Signer) SignDetached(purpose string, msg []byte) []byte {
	return ed25519.Sign(s.priv, detachedBytes(purpose, s.host, msg))
}

// VerifyDetached reports whether sig is host's SignDetached signature of
// msg for purpose, by the key the keyring has for host.
func (k *Keyring) VerifyDetached(host, purpose string, msg, sig []byte) bool {
	pub, ok := k.keys[host]
	return ok && len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, detachedBytes(purpose, host, msg), sig)
}

func detachedBytes(purpose, host string, msg []byte) []byte {
	b := make([]byte, 0, len("dvms-detached-v1\x00")+len(purpose)+len(host)+2+len(msg))
	b = append(b, "dvms-detached-v1\x00"...)
	b = append(b, purpose...)
	b = append(b, 0)
	b = append(b, host...)
	b = append(b, 0)
	return append(b, msg...)
}
