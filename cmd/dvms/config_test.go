package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSampleConfigLoads(t *testing.T) {
	c, err := loadConfig("../../etc/dvms/dvms.conf.sample", "compute-1")
	if err != nil {
		t.Fatalf("the sample configuration does not load: %v", err)
	}
	if c.Agent.PartitionTimeout != 3500*time.Millisecond || c.Agent.K != 3 || c.Runtime.Monitor != time.Second {
		t.Fatalf("defaults: %+v", c.Agent)
	}
}

func TestConfigListsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dvms.conf")
	bad := "[scheduler]\ncpu_overload = lots\ndebounce_k = 9\n[monitor]\nsource = tea-leaves\ndrain_reason_pattern = ([\n[consensus]\nvoters = 4\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(path, "compute-1")
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"cpu_overload", "debounce K=9", "tea-leaves", "drain_reason_pattern", "voters = 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestEnvironmentOverridesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dvms.conf")
	if err := os.WriteFile(path, []byte("[nats]\nurl = nats://file:4222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DVMS_NATS_URL", "nats://env:4222")
	t.Setenv("DVMS_SCHEDULER_CPU_OVERLOAD", "0.9")
	c, err := loadConfig(path, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSURL != "nats://env:4222" || c.Agent.Thresholds.CPUOverload != 0.9 {
		t.Fatalf("env not applied: %s %v", c.NATSURL, c.Agent.Thresholds.CPUOverload)
	}
}
