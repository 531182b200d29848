package daemon

import (
	"testing"
)

func TestAdvertiseAddr(t *testing.T) {
	cases := []struct{ bind, adv, nats, want string }{
		{"0.0.0.0:7420", "10.0.0.5:7420", "nats://127.0.0.1:4222", "10.0.0.5:7420"},
		{"127.0.0.1:0", "", "nats://127.0.0.1:4222", ""}, // the service advertises what it bound
		{"0.0.0.0:7420", "", "nats://127.0.0.1:4222,nats://127.0.0.2:4222", "127.0.0.1:7420"},
		{":7420", "", "nats://127.0.0.1", "127.0.0.1:7420"},
		{"", "", "nats://127.0.0.1:4222", ""},
	}
	for _, c := range cases {
		got, err := advertiseAddr(c.bind, c.adv, c.nats)
		if err != nil || got != c.want {
			t.Errorf("advertiseAddr(%q, %q, %q) = %q, %v; want %q", c.bind, c.adv, c.nats, got, err, c.want)
		}
	}
	if _, err := advertiseAddr("0.0.0.0:7420", "", "::bad"); err == nil {
		t.Error("no error for an unusable NATS url")
	}
}

func TestEmbeddedConfig(t *testing.T) {
	ec, err := embeddedConfig("nats://127.0.0.1:4333")
	if err != nil || ec.Host != "127.0.0.1" || ec.Port != 4333 {
		t.Fatalf("%+v %v", ec, err)
	}
	if _, err := embeddedConfig("not a url"); err == nil {
		t.Fatal("accepted a bad url")
	}
}
