package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
)

func TestAgentRefusesToRunUnsignedUnlessTold(t *testing.T) {
	var c Config
	if err := CheckTrust(c); !errors.Is(err, errUnsigned) {
		t.Fatalf("no keys_dir: %v, want errUnsigned", err)
	}
	c.InsecureUnsigned = true
	if err := CheckTrust(c); err != nil {
		t.Fatalf("insecure_unsigned: %v", err)
	}
	c.InsecureUnsigned, c.KeysDir = false, "/etc/dvms/keys"
	if err := CheckTrust(c); err != nil {
		t.Fatalf("keys_dir: %v", err)
	}
}

func TestSignedBusNeedsOwnKeys(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.GenerateKey(dir, "compute-2"); err != nil {
		t.Fatal(err)
	}
	c := Config{KeysDir: dir, MessageWindow: auth.DefaultConfig().Window}
	c.Agent.ID = "compute-1"
	hub := bus.NewHub(1)
	if _, _, err := signedBus(c, hub.Transport("compute-1"), zerolog.Nop()); err == nil {
		t.Fatal("started without its own private key")
	}
	if _, err := auth.GenerateKey(dir, "compute-1"); err != nil {
		t.Fatal(err)
	}
	tr, w, err := signedBus(c, hub.Transport("compute-1"), zerolog.Nop())
	if err != nil || w == nil || tr != bus.Transport(w) {
		t.Fatalf("signedBus: %v (wrapped %v)", err, w != nil)
	}
}

// The scheduler-api takes a host's summary only when that host signed it.
func TestSubscribeVerified(t *testing.T) {
	dir := t.TempDir()
	for _, h := range []string{"h1", "h2"} {
		if _, err := auth.GenerateKey(dir, h); err != nil {
			t.Fatal(err)
		}
	}
	ring, _ := auth.LoadKeyring(dir)
	s1, _ := auth.LoadSigner(dir, "h1")
	hub := bus.NewHub(1)
	h1, _ := auth.Wrap(hub.Transport("h1"), s1, ring, auth.DefaultConfig())
	c := Config{KeysDir: dir, MessageWindow: auth.DefaultConfig().Window}
	var got []string
	if _, err := SubscribeVerified(c, hub.Transport("api"), bus.SummarySubject("r", "*"), func(s string, d []byte) {
		got = append(got, s+"="+string(d))
	}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = h1.Publish(ctx, bus.SummarySubject("r", "h1"), []byte("mine"))
	_ = h1.Publish(ctx, bus.SummarySubject("r", "h2"), []byte("about h2"))
	_ = hub.Transport("x").Publish(ctx, bus.SummarySubject("r", "h2"), []byte("unsigned"))
	hub.DeliverAll(5)
	if strings.Join(got, ",") != "dvms.r.summary.h1=mine" {
		t.Fatalf("delivered %q, want only h1's own summary", got)
	}
}

func TestWarnReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	WarnReadable(log, path, "clouds.yaml")
	if buf.Len() != 0 {
		t.Fatalf("0600: %s", buf.String())
	}
	_ = os.Chmod(path, 0o644)
	WarnReadable(log, path, "clouds.yaml")
	if !strings.Contains(buf.String(), "world-readable") {
		t.Fatalf("0644: no warning: %q", buf.String())
	}
}

// A NATS URL the agent refuses is quoted without its password.
func TestBadNATSURLErrorHidesPassword(t *testing.T) {
	_, err := load(t, "", "OS_CLOUD=c", "DVMS_INSECURE_UNSIGNED=true", "DVMS_NATS_URL=nats://dvms:s3cret@n1:4222,http://u:s3cret@n2")
	if err == nil || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("err = %v, want the bad URL refused", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error shows the password: %v", err)
	}
}
