package main

import (
	"testing"

	"github.com/dvms-project/dvms/internal/daemon"
)

// One dvms.conf serves the agents and scheduler-api: an agent speaks as
// its own key (nkey_auth), scheduler-api with nkey_seed (the functional
// tier's scheduler-api once looked for keys_dir/scheduler-api.key).
func TestNATSKeyOfAgentsAndSchedulerAPI(t *testing.T) {
	cfg := daemon.Config{KeysDir: "/k", NATSNkeyAuth: true, NATSNkeySeed: "/obs/ops.key", NATSURL: "nats://x:4222"}
	cfg.Agent.ID = "compute-1"
	if got := cfg.BusConfig(cfg.NATSURL).NkeySeedFile; got != "/k/compute-1.key" {
		t.Errorf("agent's nkey %q, want its own key", got)
	}
	cfg.Agent.ID = "scheduler-api" // what loadConfig gives scheduler-api
	if got := daemon.SchedAPIBusConfig(cfg).NkeySeedFile; got != "/obs/ops.key" {
		t.Errorf("scheduler-api's nkey %q, want nkey_seed", got)
	}
}
