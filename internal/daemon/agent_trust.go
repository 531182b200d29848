package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/node"
)

// errUnsigned: no keys and no explicit opt-out.
var errUnsigned = errors.New("[DEFAULT] keys_dir is not set: the agent signs and verifies every message with the region's keys " +
	"(`dvms keygen`); set keys_dir, or insecure_unsigned = true to run a trial without them")

// checkTrust is the agent's rule between keys_dir and insecure_unsigned.
func CheckTrust(cfg Config) error {
	if cfg.KeysDir == "" && !cfg.InsecureUnsigned {
		return errUnsigned
	}
	return nil
}

// signedBus wraps tr with the agent's signer and the region's keyring
// (keys_dir), or returns tr as is when running unsigned (checkTrust
// allowed it). Dropped messages are logged, at most 10 per 10 s.
func signedBus(cfg Config, tr bus.Transport, log zerolog.Logger) (bus.Transport, *auth.Transport, error) {
	if cfg.KeysDir == "" {
		log.Warn().Msg("insecure_unsigned: messages are neither signed nor verified; anyone able to publish on NATS can steer this agent")
		return tr, nil, nil
	}
	host := cfg.Agent.ID
	signer, err := auth.LoadSigner(cfg.KeysDir, host)
	if err != nil {
		return nil, nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	ring, err := auth.LoadKeyring(cfg.KeysDir)
	if err != nil {
		return nil, nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	if !ring.Has(host) {
		return nil, nil, fmt.Errorf("[DEFAULT] keys_dir: no %s%s: the other agents could not verify this one", host, auth.PubExt)
	}
	ac, _ := authConfig(cfg, log)
	w, err := auth.Wrap(tr, signer, ring, ac)
	if err != nil {
		return nil, nil, err
	}
	log.Info().Str("keys_dir", cfg.KeysDir).Int("keys", ring.Len()).Str("public_key", signer.PublicKey()).Msg("messages signed and verified")
	return w, w, nil
}

// raftTLS is the mutual TLS of the raft group, made from the agent's own
// key and the region's keyring (the same keys that sign messages), or
// nil when running unsigned.
func raftTLS(cfg Config) (*auth.PeerTLS, error) {
	if cfg.KeysDir == "" {
		return nil, nil
	}
	signer, err := auth.LoadSigner(cfg.KeysDir, cfg.Agent.ID)
	if err != nil {
		return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	ring, err := auth.LoadKeyring(cfg.KeysDir)
	if err != nil {
		return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	return auth.NewPeerTLS(signer, ring)
}

// authConfig is the verification the agent and the services reading it
// use: [DEFAULT] message_window, and dropped messages logged at most ten
// per 10 s (dlog is that sampled logger).
// operatorKeys are the public keys of the operators allowed to send
// run-time controls (keys_dir/operators/*.pub; scheduler/control); nil when
// keys_dir is not set or has none (every signed command is then refused).
func operatorKeys(cfg Config, log zerolog.Logger) *auth.Keyring {
	if cfg.KeysDir == "" {
		log.Warn().Msg("insecure_unsigned: operator commands (dvms pause, mode, exclude) are taken unsigned from anyone able to publish on NATS")
		return nil
	}
	dir := filepath.Join(cfg.KeysDir, control.OperatorsDir)
	ring, err := auth.LoadKeyring(dir)
	if err != nil {
		log.Warn().Err(err).Str("dir", dir).Msg("no operator key: operator commands (dvms pause, mode, exclude) will be refused")
		return nil
	}
	log.Info().Str("dir", dir).Int("keys", ring.Len()).Msg("operator commands verified with these keys")
	return ring
}

func authConfig(cfg Config, log zerolog.Logger) (ac auth.Config, dlog zerolog.Logger) {
	ac = auth.DefaultConfig()
	ac.Window = cfg.MessageWindow
	dlog = log.Sample(&zerolog.BurstSampler{Burst: 10, Period: 10 * time.Second})
	ac.OnDrop = func(subject, sender, reason string, count int64) {
		dlog.Warn().Str("subject", subject).Str("signer", sender).Str("reason", reason).Int64("dropped", count).
			Msg("unauthenticated message dropped")
	}
	return ac, dlog
}

// SubscribeVerified subscribes h to per-host subject (its last token is
// the host) for a service that reads what agents publish: with keys_dir,
// only messages signed by the host the subject names reach h; without,
// everything does.
func SubscribeVerified(cfg Config, tr bus.Transport, subject string, h bus.Handler, log zerolog.Logger) (bus.Subscription, error) {
	if cfg.KeysDir == "" {
		log.Warn().Msg("no keys_dir: summaries are not verified; anyone able to publish on NATS can feed this service")
		return tr.Subscribe(subject, h)
	}
	ring, err := auth.LoadKeyring(cfg.KeysDir)
	if err != nil {
		return nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	ac, dlog := authConfig(cfg, log)
	v, err := auth.Wrap(tr, nil, ring, ac)
	if err != nil {
		return nil, err
	}
	return v.SubscribeFrom(subject, func(subj, from string, data []byte) {
		if !strings.HasSuffix(subj, "."+from) {
			dlog.Warn().Str("subject", subj).Str("signer", from).Msg("message about another host dropped")
			return
		}
		h(subj, data)
	})
}

// warnReadable warns when a file holding secrets can be read by others
// than the agent: by everyone, or by a group the agent does not run as
// (root:dvms 0640 is fine for an agent running as group dvms).
func WarnReadable(log zerolog.Logger, path, what string) {
	if path == "" {
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	mode := st.Mode().Perm()
	gid := -1
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		gid = int(sys.Gid)
	}
	switch {
	case mode&0o004 != 0:
		log.Warn().Str("file", path).Str("mode", fmt.Sprintf("%04o", mode)).Msg(what + " is world-readable: chmod o-r (it may hold credentials)")
	case mode&0o040 != 0 && gid != os.Getgid():
		log.Warn().Str("file", path).Str("mode", fmt.Sprintf("%04o", mode)).Int("gid", gid).
			Msg(what + " is readable by a group the agent does not run as: chmod g-r or chgrp to the agent's group")
	}
}

// cloudsFile is the clouds.yaml the Nova client reads: [nova] clouds_yaml,
// else the first of the openstack CLI's search path that exists.
func CloudsFile(configured string) string {
	if configured != "" {
		return configured
	}
	var cands []string
	if v := os.Getenv("OS_CLIENT_CONFIG_FILE"); v != "" {
		cands = append(cands, v)
	}
	cands = append(cands, "clouds.yaml")
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, ".config", "openstack", "clouds.yaml"))
	}
	cands = append(cands, "/etc/openstack/clouds.yaml")
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return ""
}

// StartChecks runs what the agent checks of its configuration as it
// starts, before it needs NATS or Nova, with the agent's own functions:
// its keys (signedBus), the Raft group's TLS (raftTLS), the SWIM key and
// addresses (swimConfig).
func StartChecks(cfg Config) error {
	var errs []error
	if _, _, err := signedBus(cfg, bus.NewHub(1).Transport(cfg.Agent.ID), zerolog.Nop()); err != nil {
		errs = append(errs, err)
	}
	if cfg.Arbiter == "raft" {
		if _, err := raftTLS(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Membership == "swim" {
		if _, err := swimConfig(cfg, cfg.NATSURL, node.Heartbeat{Host: cfg.Agent.ID}, nil, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
