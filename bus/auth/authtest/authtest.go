// Package authtest makes region keys for tests.
package authtest

import (
	"slices"
	"testing"

	"github.com/nats-io/nkeys"

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
