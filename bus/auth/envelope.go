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
