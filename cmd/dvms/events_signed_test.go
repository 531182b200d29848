package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/scheduler/journal"
)

// `dvms events --follow --keys-dir` shows a journal update only when the
// agent it names signed it: c1's own update is shown; a forger holding
// c3's key publishes updates in c1's name, signed by c3 and unsigned,
// and passes c1's signed update on again: each is dropped and said so
// on stderr. Without --keys-dir the forged updates are shown (the
// control: the test can fail).
func TestEventsFollowVerifiesUpdates(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := testbus.NewKeys(t, t.TempDir(), "c1", "c3")
	dir := keys.Dir
	signed := func(h string) (*bus.NATS, bus.Transport) {
		tr := testbus.Connect(t, ctx, url, h)
		return tr, keys.Wrap(tr, h)
	}
	_, c1 := signed("c1")
	plain3, c3 := signed("c3")
	// The forger passes on what c1 signed: it listens on the subject.
	var replay [][]byte
	var rmu sync.Mutex
	sub, err := plain3.Subscribe(bus.EventsSubject("g"), func(_ string, data []byte) {
		var probe map[string]any
		if json.Unmarshal(data, &probe) == nil {
			return // unsigned: the forger's own
		}
		rmu.Lock()
		replay = append(replay, append([]byte(nil), data...))
		rmu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	update := func(reason string) []byte {
		data, err := json.Marshal(journal.Update{V: 1, Agent: "c1", At: time.Now(), Event: "ev-1", Kind: "overload", Host: "c1", Record: "event-raised", Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	subject := bus.EventsSubject("g")

	follow := func(keys bool, want ...string) (stdout, stderr string) {
		t.Helper()
		var out, errs testlog.Buffer
		fctx, stop := context.WithCancel(ctx)
		done := make(chan int, 1)
		args := []string{"dvms", "events", "--follow", "--nats-url", url, "--region", "g", "--timeout", "200ms"}
		if keys {
			args = append(args, "--keys-dir", dir)
		}
		go func() { done <- runContext(fctx, args, &out, &errs) }()
		defer func() {
			stop()
			<-done
		}()
		// Published again until the command (subscribed once it
		// listed the history) shows or drops what is wanted.
		waitUntil(t, 20*time.Second, "the followed updates", func() bool {
			_ = c1.Publish(ctx, subject, update("honest"))
			_ = c3.Publish(ctx, subject, update("forged-signed-by-c3"))
			_ = plain3.Publish(ctx, subject, update("forged-unsigned"))
			rmu.Lock()
			again := replay
			replay = nil
			rmu.Unlock()
			for _, d := range again {
				_ = plain3.Publish(ctx, subject, d)
			}
			all := out.String() + errs.String()
			for _, w := range want {
				if !strings.Contains(all, w) {
					return false
				}
			}
			return true
		})
		return out.String(), errs.String()
	}

	out, errs := follow(true, "honest", "update of c1 signed by c3", "not signed", "update of c1 already shown")
	if strings.Contains(out, "forged") {
		t.Errorf("with --keys-dir a forged update was shown:\n%s", out)
	}
	if n := strings.Count(out, "honest"); n < 1 {
		t.Errorf("c1's own update not shown:\n%s\nstderr:\n%s", out, errs)
	}
	t.Logf("with --keys-dir, stderr:\n%s", errs)

	out, _ = follow(false, "forged-signed-by-c3", "forged-unsigned")
	if !strings.Contains(out, "honest") {
		t.Errorf("without --keys-dir c1's update not shown:\n%s", out)
	}
}

// `dvms events --follow` judges an update's age by the agents' own
// message_window: an update c1 signed 60 s ago (its clock behind) is
// dropped as old under the default 30 s, shown once --config's
// [DEFAULT] message_window is 120, and dropped again with
// --message-window 45s, which overrides the file.
func TestEventsFollowMessageWindow(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := testbus.NewKeys(t, t.TempDir(), "c1")
	signer, err := auth.LoadSigner(keys.Dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.DefaultConfig()
	cfg.Now = func() time.Time { return time.Now().Add(-time.Minute) }
	c1, err := auth.Wrap(testbus.Connect(t, ctx, url, "c1"), signer, keys.Ring, cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "dvms.conf")
	if err := os.WriteFile(conf, []byte("[DEFAULT]\nmessage_window = 120\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(journal.Update{V: 1, Agent: "c1", At: time.Now(), Event: "ev-1", Kind: "overload", Host: "c1", Record: "event-raised", Reason: "late-clock"})
	if err != nil {
		t.Fatal(err)
	}
	follow := func(want string, extra ...string) (stdout string) {
		t.Helper()
		var out, errs testlog.Buffer
		fctx, stop := context.WithCancel(ctx)
		done := make(chan int, 1)
		args := append([]string{"dvms", "events", "--follow", "--nats-url", url, "--region", "g", "--timeout", "200ms", "--keys-dir", keys.Dir}, extra...)
		go func() { done <- runContext(fctx, args, &out, &errs) }()
		defer func() {
			stop()
			<-done
		}()
		waitUntil(t, 20*time.Second, want, func() bool {
			_ = c1.Publish(ctx, bus.EventsSubject("g"), data)
			return strings.Contains(out.String()+errs.String(), want)
		})
		return out.String()
	}
	if out := follow("not within 30s of now"); strings.Contains(out, "late-clock") {
		t.Errorf("an update signed a minute ago shown under the default window:\n%s", out)
	}
	follow("late-clock", "--config", conf)
	if out := follow("not within 45s of now", "--config", conf, "--message-window", "45s"); strings.Contains(out, "late-clock") {
		t.Errorf("--message-window 45s did not override the file's 120 s:\n%s", out)
	}
}
