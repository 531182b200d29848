// Package authtest makes region keys for tests.
package authtest

import (
	"slices"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
)

// Signers makes a key per host, and the keyring of members: others have
// keys the keyring does not hold (strangers).
func Signers(t testing.TB, members []string, others ...string) (map[string]*auth.Signer, *auth.Keyring) {
	t.Helper()
	signers, pubs := map[string]*auth.Signer{}, map[string]string{}
	for i, h := range append(slices.Clone(members), others...) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		s, err := auth.NewSigner(h, seed)
		if err != nil {
			t.Fatal(err)
		}
		signers[h] = s
		if i < len(members) {
			pubs[h] = s.PublicKey()
		}
	}
	ring, err := auth.NewKeyring(pubs)
	if err != nil {
		t.Fatal(err)
	}
	return signers, ring
}

// KeysDir writes a key per host in a fresh keys_dir (HOST.key, HOST.pub)
// and returns it with its keyring and each host's signer.
func KeysDir(t testing.TB, hosts ...string) (dir string, signers map[string]*auth.Signer, ring *auth.Keyring) {
	t.Helper()
	dir = t.TempDir()
	signers = map[string]*auth.Signer{}
	for _, h := range hosts {
		s, err := auth.GenerateKey(dir, h)
		if err != nil {
			t.Fatal(err)
		}
		signers[h] = s
	}
	ring, err := auth.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, signers, ring
}

// Wrap signs what tr publishes as s and verifies what it receives
// against ring (auth.DefaultConfig).
func Wrap(t testing.TB, tr bus.Transport, s *auth.Signer, ring *auth.Keyring) *auth.Transport {
	t.Helper()
	w, err := auth.Wrap(tr, s, ring, auth.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return w
}
