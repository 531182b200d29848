package bus

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{
		{"dvms.r.agent.h1", "dvms.r.agent.h1", true},
		{"dvms.r.agent.*", "dvms.r.agent.h1", true},
		{"dvms.r.agent.*", "dvms.r.agent.h1.x", false},
		{"dvms.>", "dvms.r.agent.h1", true},
		{"dvms.>", "dvms", false},
		{"dvms.r.agent.h1", "dvms.r.agent.h2", false},
	} {
		if got := Match(tc.p, tc.s); got != tc.ok {
			t.Errorf("Match(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

func TestHubHooks(t *testing.T) {
	ctx := context.Background()
	h := NewHub(1)
	a, b, c := h.Transport("a"), h.Transport("b"), h.Transport("c")
	var got []string
	for _, tr := range []Transport{b, c} {
		if _, err := tr.Subscribe("x.*", func(s string, d []byte) { got = append(got, string(d)) }); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Publish(ctx, "x.1", []byte("m1"))
	if len(got) != 0 {
		t.Fatal("delivered before Deliver")
	}
	h.DeliverAll(10)
	if len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	got = nil
	h.Partition([]string{"a"}, []string{"b"})
	_ = a.Publish(ctx, "x.1", []byte("m2"))
	h.DeliverAll(10)
	if len(got) != 1 || h.Dropped != 1 {
		t.Fatalf("partition: got %v dropped %d", got, h.Dropped)
	}
	h.Heal()
	got = nil
	h.Dup = func(_, to, _ string) bool { return to == "c" }
	h.Delay = func(_, to, _ string) int {
		if to == "b" {
			return 2
		}
		return 0
	}
	_ = a.Publish(ctx, "x.1", []byte("m3"))
	if n := h.Deliver(); n != 2 {
		t.Fatalf("first round delivered %d, want the 2 copies to c", n)
	}
	h.DeliverAll(10)
	if len(got) != 3 {
		t.Fatalf("after delay: %v", got)
	}
}

func TestEmbeddedNATSPublishSubscribeAndRestart(t *testing.T) {
	ns, err := StartEmbedded(EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	ctx := context.Background()
	c, err := ConnectNATS(ctx, Config{URL: ns.ClientURL(), Name: "test", ReconnectWait: 50 * time.Millisecond, MaxReconnects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var got []string
	if _, err := c.Subscribe(AgentSubject("r", "*"), func(s string, d []byte) {
		mu.Lock()
		got = append(got, s+"="+string(d))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			k := len(got)
			mu.Unlock()
			if k >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("got %v, want %d messages", got, n)
	}
	if err := c.Publish(ctx, AgentSubject("r", "h1"), []byte("one")); err != nil {
		t.Fatal(err)
	}
	wait(1)
	if err := ns.Restart(); err != nil {
		t.Fatal(err)
	}
	// The client reconnects by itself and the subscription comes back.
	deadline := time.Now().Add(10 * time.Second)
	for !c.Connected() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Publish(ctx, AgentSubject("r", "h2"), []byte("two")); err != nil {
		t.Fatal(err)
	}
	wait(2)
	if got[1] != "dvms.r.agent.h2=two" {
		t.Fatalf("after restart: %v", got)
	}
}

func BenchmarkEmbeddedRoundTrip(b *testing.B) {
	ns, err := StartEmbedded(EmbeddedConfig{Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Shutdown()
	c, err := ConnectNATS(context.Background(), Config{URL: ns.ClientURL()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{}, 1)
	_, _ = c.Subscribe("bench", func(string, []byte) { done <- struct{}{} })
	msg := make([]byte, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = c.Publish(context.Background(), "bench", msg)
		<-done
	}
}

func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                     "nats://127.0.0.1:4222",
		"nats://dvms:s3cret@n1:4222,nats://n2:4222": "nats://dvms:xxxxx@n1:4222,nats://n2:4222",
		"nats://tok3n@n1:4222":                      "nats://xxxxx@n1:4222",
		"nats://a:b@n1:4222,tls://c:d@n2:4443":      "nats://a:xxxxx@n1:4222,tls://c:xxxxx@n2:4443",
		"nats://u:p%zz@host":                        "(unparsable URL with credentials)",
	} {
		got := RedactURLs(in)
		if got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"s3cret", "tok3n", ":b@", ":d@"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURLs(%q) leaks %q: %q", in, secret, got)
			}
		}
	}
}
