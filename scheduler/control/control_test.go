package control

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/testbus"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/rs/zerolog"
)

func cmdAt(op, host, mode string, at time.Time, id string) record {
	c := Command{V: 1, ID: id, At: at, Op: op, Host: host, Mode: mode}
	raw, _ := json.Marshal(c)
	return record{cmd: c, raw: raw}
}

// Commands commute: agents that took the same commands in any order hold
// the same controls; a replay changes nothing; a host's mode wins over
// the region's, which wins over advise_only.
func TestControlsLastWriterWins(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []record{
		cmdAt(OpPause, "", "", t0, "a"),
		cmdAt(OpResume, "", "", t0.Add(time.Second), "b"),
		cmdAt(OpPause, "", "", t0.Add(2*time.Second), "c"),
		cmdAt(OpExclude, "c2", "", t0, "d"),
		cmdAt(OpInclude, "c2", "", t0, "e"), // same time: the larger id wins
		cmdAt(OpExclude, "c3", "", t0, "f"),
		cmdAt(OpMode, "", ModeAdvise, t0, "g"),
		cmdAt(OpMode, "c4", ModeEnforce, t0, "h"),
		cmdAt(OpMode, "c5", ModeEnforce, t0, "i"),
		cmdAt(OpMode, "c5", ModeRegion, t0.Add(time.Second), "j"),
	}
	want := View{Paused: true, Mode: ModeAdvise, HostModes: map[string]string{"c4": ModeEnforce}, Excluded: []string{"c3"}, Latest: t0.Add(2 * time.Second)}
	rng := rand.New(rand.NewSource(1))
	for range 20 {
		c := NewRegisters(false)
		for _, i := range rng.Perm(len(recs)) {
			c.merge(recs[i])
		}
		if got := c.View(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("view %+v, want %+v", got, want)
		}
		if c.merge(recs[0]) || c.merge(recs[2]) {
			t.Fatal("a replayed command changed the controls")
		}
		if !c.Paused() || c.Excluded("c2") || !c.Excluded("c3") || !c.Advise("c1") || c.Advise("c4") || !c.Advise("c5") {
			t.Fatalf("paused %v excluded c2 %v c3 %v advise c1 %v c4 %v c5 %v", c.Paused(), c.Excluded("c2"), c.Excluded("c3"), c.Advise("c1"), c.Advise("c4"), c.Advise("c5"))
		}
	}
	if c := NewRegisters(true); !c.Advise("c1") || c.Paused() || c.Excluded("c1") {
		t.Fatal("without a command: advise_only, not paused, nobody excluded")
	}
}

// A command signed long ago is refused when published (stale) but taken
// when a peer passes it on (it was verified when it was new, and its
// signature still holds); a tampered one is refused either way.
func TestControlCommandFreshness(t *testing.T) {
	op, ring := operator(t, "alice")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &Service{Region: "r", Secure: true, Ring: ring, Window: 30 * time.Second, Now: func() time.Time { return now }}
	old := now.Add(-time.Hour)
	payload, _ := json.Marshal(Command{V: 1, ID: "x", At: old, Op: OpPause})
	raw := op.Seal(bus.ControlSubject("r"), payload, old)
	if _, why := s.open(raw, true); !strings.HasPrefix(why, "stale") {
		t.Errorf("published an hour late: %q, want stale", why)
	}
	if r, why := s.open(raw, false); why != "" || r.by != "alice" || r.cmd.Op != OpPause {
		t.Errorf("passed on: %+v, %q", r, why)
	}
	bad := slices.Clone(raw)
	bad[len(bad)-70] ^= 1
	for _, live := range []bool{true, false} {
		if _, why := s.open(bad, live); !strings.Contains(why, "bad-signature") {
			t.Errorf("tampered (live %v): %q", live, why)
		}
	}
	s.Ring = nil // keys_dir without operators/
	if _, why := s.open(raw, false); !strings.Contains(why, "no operator key") {
		t.Errorf("no operator keys: %q", why)
	}
}

// The protocol alone, over a real NATS server: a signed pause reaches
// the agent serving at the time (which answers the sender's inbox) and
// an agent that starts later learns it from its peer; an unsigned one is
// refused with its reason and changes nothing.
func TestServicePassesCommandsOn(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(name string) *bus.NATS { return testbus.Connect(t, ctx, url, name) }
	op, ring := operator(t, "alice")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	serve := func(host string) *Registers {
		regs := NewRegisters(false)
		s := &Service{Region: "r", Host: host, Bus: connect(host), Secure: true, Ring: ring, Window: time.Minute,
			Registers: regs, Watch: func() bool { return false }, Members: func() []string { return []string{host} },
			Apply: func() {}, Log: zerolog.Nop(), DropLog: zerolog.Nop(), Now: time.Now, Rand: rand.New(rand.NewSource(1))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
		return regs
	}
	c1 := serve("c1")
	cli := connect("cli")
	acks := make(chan Ack, 16)
	sub, err := cli.Subscribe("_INBOX.test", func(_ string, data []byte) {
		var a Ack
		if json.Unmarshal(data, &a) == nil {
			acks <- a
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	send := func(cmd Command, signed bool) Ack {
		t.Helper()
		cmd.V, cmd.At, cmd.Reply = 1, time.Now(), "_INBOX.test"
		data, _ := json.Marshal(cmd)
		if signed {
			data = op.Seal(bus.ControlSubject("r"), data, time.Now())
		}
		// The service subscribes asynchronously: send until answered.
		for {
			if err := cli.Publish(ctx, bus.ControlSubject("r"), data); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-acks:
				return a
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	if a := send(Command{ID: "a", Op: OpPause}, false); a.Accepted || !strings.Contains(a.Reason, "not signed") || c1.Paused() {
		t.Fatalf("unsigned pause: %+v, paused %v", a, c1.Paused())
	}
	if a := send(Command{ID: "b", Op: OpPause}, true); !a.Accepted || !a.Changed || !a.Control.Paused || !c1.Paused() {
		t.Fatalf("signed pause: %+v", a)
	}
	c2 := serve("c2")
	testwait.Until(t, 20*time.Second, "c2 learns the pause from c1", func() (bool, string) {
		return c2.Paused(), fmt.Sprintf("c2 holds %+v", c2.View())
	})
}

// operator is an operator's key and the keyring that holds it.
func operator(t *testing.T, name string) (*auth.Signer, *auth.Keyring) {
	t.Helper()
	dir := t.TempDir()
	op, err := auth.GenerateKey(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := auth.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	return op, ring
}

// Red team: a year-old signed pause, kept by an eavesdropper (or an agent
// key's holder) and passed on to the region on the control-state
// subject, pauses nobody: refused, counted and logged as expired. A pause
// signed today and passed on the same way still pauses (a restarted
// agent learns the controls from its peers), and a held pause is
// forgotten everywhere at the same age.
func TestOldCommandPassedOnIsRefused(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	op, ring := operator(t, "alice")
	regs := NewRegisters(false)
	svc := &Service{Region: "r", Host: "c1", Bus: testbus.Connect(t, ctx, url, "c1"), Secure: true, Ring: ring, Window: time.Minute,
		Registers: regs, Watch: func() bool { return false }, Members: func() []string { return []string{"c1"} },
		Apply: func() {}, Log: zerolog.Nop(), DropLog: zerolog.Nop(), Now: time.Now, Rand: rand.New(rand.NewSource(1))}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			t.Error(err)
		}
	})
	peer := testbus.Connect(t, ctx, url, "insider")
	passOn := func(id string, at time.Time) []byte {
		payload, _ := json.Marshal(Command{V: 1, ID: id, At: at, Op: OpPause})
		st, _ := json.Marshal(state{V: 1, From: "c4", Records: [][]byte{op.Seal(bus.ControlSubject("r"), payload, at)}})
		return st
	}
	yearOld := passOn("old", time.Now().Add(-365*24*time.Hour))
	// The service subscribes asynchronously: pass it on until counted.
	testwait.Until(t, 20*time.Second, "the year-old pause is refused as expired", func() (bool, string) {
		if err := peer.Publish(ctx, bus.ControlStateSubject("r"), yearOld); err != nil {
			t.Fatal(err)
		}
		return svc.Expired() > 0, fmt.Sprintf("expired %d", svc.Expired())
	})
	if regs.Paused() {
		t.Fatal("a year-old pause passed on paused the agent")
	}
	fresh := passOn("new", time.Now())
	testwait.Until(t, 20*time.Second, "a pause signed today and passed on is taken", func() (bool, string) {
		if err := peer.Publish(ctx, bus.ControlStateSubject("r"), fresh); err != nil {
			t.Fatal(err)
		}
		return regs.Paused(), fmt.Sprintf("holds %+v", regs.View())
	})
}

// The age limit itself: refused past MaxAge (published or passed on) and
// ahead of the agent's clock, a command's time bound to its signing
// time; a held command stops counting at MaxAge and the sweep forgets
// it.
func TestControlMaxAge(t *testing.T) {
	op, ring := operator(t, "alice")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &Service{Region: "r", Secure: true, Ring: ring, Window: 30 * time.Second, MaxAge: 48 * time.Hour,
		Now: func() time.Time { return now }, Log: zerolog.Nop(), Apply: func() {}}
	seal := func(at, signed time.Time) []byte {
		payload, _ := json.Marshal(Command{V: 1, ID: "x", At: at, Op: OpPause})
		return op.Seal(bus.ControlSubject("r"), payload, signed)
	}
	for _, tc := range []struct {
		name       string
		at, signed time.Time
		want       string
	}{
		{"a day old", now.Add(-24 * time.Hour), now.Add(-24 * time.Hour), ""},
		{"three days old", now.Add(-72 * time.Hour), now.Add(-72 * time.Hour), "expired"},
		{"an hour ahead", now.Add(time.Hour), now.Add(time.Hour), "from the future"},
		{"its time not its signing time", now.Add(-72 * time.Hour), now, "command time"},
	} {
		if _, why := s.open(seal(tc.at, tc.signed), false); !strings.HasPrefix(why, tc.want) || (tc.want == "") != (why == "") {
			t.Errorf("%s: %q, want %q", tc.name, why, tc.want)
		}
	}
	if n := s.Expired(); n != 3 {
		t.Errorf("expired %d, want 3", n)
	}
	s.Registers = NewRegisters(false)
	s.Registers.limitAge(s.maxAge(), s.Now)
	r, why := s.open(seal(now.Add(-47*time.Hour), now.Add(-47*time.Hour)), false)
	if why != "" || !s.Registers.merge(r) || !s.Registers.Paused() {
		t.Fatalf("a 47-hour-old pause: %q, paused %v", why, s.Registers.Paused())
	}
	now = now.Add(2 * time.Hour)
	if s.Registers.Paused() {
		t.Fatal("a pause past control_max_age still counts")
	}
	s.sweep()
	if len(s.Registers.raws()) != 0 || s.Expired() != 4 {
		t.Fatalf("after the sweep: %d held, expired %d", len(s.Registers.raws()), s.Expired())
	}
}
