package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"
)

// Key files: in a keys directory, <host>.pub holds host's public key and
// <host>.key its seed (the private key), each an nkeys user key on one
// line. A seed file must not be readable by group or others.
const (
	PubExt  = ".pub"
	SeedExt = ".key"
)

var (
	// ErrNoKey is returned when a host has no public key in the keyring.
	ErrNoKey = errors.New("auth: no key for host")
	// ErrKeyFile is returned for an unusable key file.
	ErrKeyFile = errors.New("auth: bad key file")
)

// ValidHost reports whether h can name a key file and a signer: non-empty,
// at most 255 bytes, letters, digits, '-', '_' and '.' only, not starting
// with '.' (no path can be smuggled through a host name).
func ValidHost(h string) bool {
	if h == "" || len(h) > 255 || h[0] == '.' {
		return false
	}
	for _, c := range []byte(h) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Signer signs as one host.
type Signer struct {
	host string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// NewSigner returns a signer for host from an nkeys user seed ("SU…").
func NewSigner(host string, seed []byte) (*Signer, error) {
	if !ValidHost(host) {
		return nil, fmt.Errorf("%w: host name %q", ErrKeyFile, host)
	}
	prefix, raw, err := nkeys.DecodeSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return nil, fmt.Errorf("%w: seed of %s: %v", ErrKeyFile, host, err)
	}
	if prefix != nkeys.PrefixByteUser {
		return nil, fmt.Errorf("%w: seed of %s is not a user seed (SU…)", ErrKeyFile, host)
	}
	priv := ed25519.NewKeyFromSeed(raw)
	return &Signer{host: host, priv: priv, pub: priv.Public().(ed25519.PublicKey)}, nil
}

// Host is the host the signer signs as.
func (s *Signer) Host() string { return s.host }

// PublicKey is the signer's public key, nkeys-encoded ("U…").
func (s *Signer) PublicKey() string {
	k, _ := nkeys.Encode(nkeys.PrefixByteUser, s.pub)
	return string(k)
}

// Keyring maps hosts to their public keys. It is read-only once built and
// safe for concurrent use.
type Keyring struct {
	keys map[string]ed25519.PublicKey
}

// NewKeyring returns a keyring of nkeys-encoded public user keys by host.
func NewKeyring(pubs map[string]string) (*Keyring, error) {
	k := &Keyring{keys: make(map[string]ed25519.PublicKey, len(pubs))}
	var errs []error
	for h, p := range pubs {
		if err := k.add(h, p); err != nil {
			errs = append(errs, err)
		}
	}
	return k, errors.Join(errs...)
}

func (k *Keyring) add(host, pub string) error {
	if !ValidHost(host) {
		return fmt.Errorf("%w: host name %q", ErrKeyFile, host)
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(strings.TrimSpace(pub)))
	if err != nil {
		return fmt.Errorf("%w: public key of %s (want a user key U…): %v", ErrKeyFile, host, err)
	}
	k.keys[host] = ed25519.PublicKey(raw)
	return nil
}

// Len is the number of hosts with a key.
func (k *Keyring) Len() int { return len(k.keys) }

// Has reports whether host has a key.
func (k *Keyring) Has(host string) bool { _, ok := k.keys[host]; return ok }

// LoadKeyring reads every <host>.pub of dir. A directory without any is
// an error: nobody could be verified.
func LoadKeyring(dir string) (*Keyring, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auth: keys directory: %w", err)
	}
	pubs := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, PubExt) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		pubs[strings.TrimSuffix(name, PubExt)] = string(b)
	}
	if len(pubs) == 0 {
		return nil, fmt.Errorf("%w: no *%s file in %s", ErrNoKey, PubExt, dir)
	}
	return NewKeyring(pubs)
}

// LoadSigner reads dir/<host>.key, refusing a file that group or others
// may read or write (mode 0600 or stricter), and checks that it matches
// dir/<host>.pub when that exists.
func LoadSigner(dir, host string) (*Signer, error) {
	if !ValidHost(host) {
		return nil, fmt.Errorf("%w: host name %q", ErrKeyFile, host)
	}
	path := filepath.Join(dir, host+SeedExt)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("auth: private key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: the private key must be readable by its owner only (chmod 600)", ErrKeyFile, path, st.Mode().Perm())
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: private key: %w", err)
	}
	s, err := NewSigner(host, seed)
	if err != nil {
		return nil, err
	}
	if pub, err := os.ReadFile(filepath.Join(dir, host+PubExt)); err == nil {
		if strings.TrimSpace(string(pub)) != s.PublicKey() {
			return nil, fmt.Errorf("%w: %s does not match %s%s", ErrKeyFile, path, host, PubExt)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return s, nil
}

// GenerateKey writes a new key pair of host into dir: <host>.key (mode
// 0600) and <host>.pub (0644). It refuses to overwrite an existing key.
func GenerateKey(dir, host string) (*Signer, error) {
	if !ValidHost(host) {
		return nil, fmt.Errorf("%w: host name %q", ErrKeyFile, host)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	s, err := NewSigner(host, seed)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := writeNew(filepath.Join(dir, host+SeedExt), append(seed, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, host+PubExt), []byte(s.PublicKey()+"\n"), 0o644); err != nil {
		_ = os.Remove(filepath.Join(dir, host+SeedExt))
		return nil, err
	}
	return s, nil
}

// writeNew creates path with mode (not umask-dependent), failing if it exists.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}
