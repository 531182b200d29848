package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// [operator] falls back to the agent's NATS URL, CA and region where the
// file or the environment set them, and leaves the rest empty (the
// commands' flag defaults); the identity never falls back.
func TestLoadOperatorFallsBack(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "dvms.conf")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[DEFAULT]\nregion = r1\n[nats]\nurl = nats://n1:4222\ntls_ca = " + ca + "\nnkey_seed = /agent/seed\n")
	op, err := LoadOperator(Source{File: file})
	if want := (Operator{NATSURL: "nats://n1:4222", TLSCA: ca, Region: "r1"}); err != nil || op != want {
		t.Errorf("fallbacks: %+v, %v; want %+v", op, err, want)
	}
	op, err = LoadOperator(Source{File: file, Env: fakeEnv("DVMS_OPERATOR_REGION=r2", "DVMS_NATS_URL=nats://n2:4222")})
	if err != nil || op.Region != "r2" || op.NATSURL != "nats://n2:4222" {
		t.Errorf("environment: %+v, %v", op, err)
	}
	write("[scheduler]\ncpu_overload = 0.9\n")
	if op, err := LoadOperator(Source{File: file}); err != nil || op != (Operator{}) {
		t.Errorf("nothing set: %+v, %v; want empty (the flags' defaults)", op, err)
	}
	if op, err := LoadOperator(Source{}); err != nil || op != (Operator{}) {
		t.Errorf("no file: %+v, %v", op, err)
	}
}
