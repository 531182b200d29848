// Package auth signs and verifies the messages agents publish on the bus:
// a Transport wrapper (Wrap) that seals every published payload in an
// envelope signed with the publisher's per-host ed25519 key and delivers
// to handlers only payloads whose envelope verifies against the operator's
// directory of public keys (Keyring), is fresh and was not seen before.
//
// Keys are NATS nkeys (user keys: public "U…", seed "SU…"), so the key
// that signs an agent's messages can also be its NATS user credential and
// the `nk` tool reads them; signing and verification use crypto/ed25519.
//
// Like bus, auth moves bytes and knows nothing about DVMS; it must not
// import scheduler, consensus or nova. It does not log: it counts drops by
// reason and tells an optional callback.
package auth
