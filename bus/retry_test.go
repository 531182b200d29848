package bus

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// freePort returns a TCP port of 127.0.0.1 nobody listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestConnectRetriesUntilTheServerAnswers: with RetryOnFailedConnect,
// ConnectNATS returns at once while no server answers, the connection
// keeps trying (with growing delays: ReconnectWaitMax), WaitConnected
// returns once a server comes up, and a subscription made while waiting
// works then. Without it, the connection fails at once.
func TestConnectRetriesUntilTheServerAnswers(t *testing.T) {
	port := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	c := DefaultConfig()
	c.URL = url
	if _, err := ConnectNATS(context.Background(), c); err == nil {
		t.Fatal("no server, no RetryOnFailedConnect: connected")
	}
	var mu sync.Mutex
	var events []string
	c.RetryOnFailedConnect, c.ReconnectWait, c.ReconnectWaitMax = true, 20*time.Millisecond, 100*time.Millisecond
	c.OnStateChange = func(ev string, _ error) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	n, err := ConnectNATS(context.Background(), c)
	if err != nil {
		t.Fatalf("RetryOnFailedConnect: %v", err)
	}
	defer n.Close()
	if n.Connected() {
		t.Fatal("connected with no server")
	}
	got := make(chan []byte, 1)
	if _, err := n.Subscribe("x", func(_ string, d []byte) { got <- d }); err != nil {
		t.Fatalf("subscribe while connecting: %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.WaitConnected(short); err == nil {
		t.Fatal("WaitConnected returned nil with no server")
	}
	// The failed attempts are reported (the agent logs them).
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		failed := strings.Count(strings.Join(events, ","), "connect failed")
		mu.Unlock()
		if failed >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v: want failed connection attempts reported", events)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv, err := StartEmbedded(EmbeddedConfig{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := n.WaitConnected(ctx); err != nil {
		t.Fatalf("server up, WaitConnected: %v", err)
	}
	if err := n.Publish(ctx, "x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if string(d) != "hi" {
			t.Fatalf("got %q", d)
		}
	case <-ctx.Done():
		t.Fatal("the subscription made while connecting got nothing")
	}
}
