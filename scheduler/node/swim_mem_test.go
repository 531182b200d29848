package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/dvms-project/dvms/scheduler/node"
)

// A datagram reaches a live host's transport straight away, from the
// sender's address; one to or from a killed host is lost, not an error.
func TestSwimNetDeliversAndDrops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sn, err := node.NewSwimNet(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sn.Transport("a"), sn.Transport("b")
	if _, err := a.WriteTo([]byte("ping"), sn.Addr(b)); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-b.PacketCh():
		if string(p.Buf) != "ping" || p.From.String() != sn.Addr(a) {
			t.Errorf("got %q from %s, want ping from %s", p.Buf, p.From, sn.Addr(a))
		}
	case <-time.After(time.Second):
		t.Fatal("datagram not delivered")
	}
	if _, err := a.WriteTo([]byte("x"), "10.9.9.9:9"); err == nil {
		t.Error("datagram to no host accepted")
	}
	sn.Kill(b)
	if _, err := a.WriteTo([]byte("ping"), sn.Addr(b)); err != nil {
		t.Fatalf("loss reported as an error: %v", err)
	}
	select {
	case p := <-b.PacketCh():
		t.Errorf("killed host got %q", p.Buf)
	case <-time.After(50 * time.Millisecond):
	}
	if sn.Packets.Load() != 3 || sn.Dropped.Load() != 1 || sn.Overflow.Load() != 0 {
		t.Errorf("packets %d dropped %d overflow %d, want 3, 1 and 0", sn.Packets.Load(), sn.Dropped.Load(), sn.Overflow.Load())
	}
	// A receiver that reads nothing: its buffer fills, and what does not
	// fit is lost and counted as overflow, apart from the network's loss.
	c := sn.Transport("c")
	for range 5000 {
		if _, err := a.WriteTo([]byte("ping"), sn.Addr(c)); err != nil {
			t.Fatal(err)
		}
	}
	if got := sn.Overflow.Load(); got != 5000-int64(cap(c.PacketCh())) || got == 0 {
		t.Errorf("overflow %d, want %d", got, 5000-cap(c.PacketCh()))
	}
}

// A stream dialled to a host whose memberlist no longer reads its
// streams (stopped, or starved) fails at the dial's timeout, as a TCP
// connect does, instead of holding the dialer, and with it its agent's
// shutdown, for good.
func TestSwimNetDialTimesOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sn, err := node.NewSwimNet(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sn.Transport("a"), sn.Transport("b")
	to := memberlist.Address{Addr: sn.Addr(b), Name: "b"}
	done := make(chan error, 1)
	go func() {
		// Nobody reads b's streams: its buffer fills, then a dial waits
		// out its timeout.
		for {
			c, err := a.DialAddressTimeout(to, 20*time.Millisecond)
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
		}
	}()
	select {
	case err := <-done:
		t.Logf("dial: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a dial to a host that reads no stream still blocks after 30 s")
	}
	// A host that reads takes the stream.
	c, err := b.DialAddressTimeout(memberlist.Address{Addr: sn.Addr(a), Name: "a"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case s := <-a.StreamCh():
		_ = s.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the stream never reached a")
	}
}
