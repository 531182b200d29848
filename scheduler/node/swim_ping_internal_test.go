package node

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"
)

// An ack from a host that is not a member is dropped and counted, even
// when its coordinate is good; the same ack from a member is a sample.
func TestSwimAckFromStrangerDropped(t *testing.T) {
	var got []string
	s, err := NewSwim(SwimConfig{Self: Heartbeat{Host: "a", Incarnation: "1"}, Transport: &memberlist.MockTransport{},
		Observe: func(peer string, _ *coordinate.Coordinate, _ time.Duration) error {
			got = append(got, peer)
			return nil
		}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	payload := EncodeCoord(coordinate.NewCoordinate(coordinate.DefaultConfig()))
	p := swimPing{s}
	p.NotifyPingComplete(&memberlist.Node{Name: "b"}, time.Millisecond, payload)
	if s.RejectedAcks() != 1 || len(got) != 0 {
		t.Fatalf("stranger's ack: %d rejected, samples from %v", s.RejectedAcks(), got)
	}
	s.members["b"] = Member{Heartbeat: Heartbeat{Host: "b"}}
	p.NotifyPingComplete(&memberlist.Node{Name: "b"}, time.Millisecond, payload)
	p.NotifyPingComplete(&memberlist.Node{Name: "b"}, time.Millisecond, nil) // an agent without coordinates
	if s.RejectedAcks() != 1 || len(got) != 1 || got[0] != "b" {
		t.Fatalf("member's ack: %d rejected, samples from %v", s.RejectedAcks(), got)
	}
}

func TestCoordWire(t *testing.T) {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0], c.Vec[7], c.Error, c.Adjustment, c.Height = 0.02, -0.001, 0.3, -0.0001, 0.0005
	b := EncodeCoord(c)
	if len(b) > MaxCoordPayload {
		t.Fatalf("%d bytes, more than %d", len(b), MaxCoordPayload)
	}
	back, err := DecodeCoord(b)
	if err != nil || !slices.Equal(back.Vec, c.Vec) || back.Error != c.Error || back.Adjustment != c.Adjustment || back.Height != c.Height {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	bad := func(f func(*coordinate.Coordinate)) []byte {
		x := c.Clone()
		f(x)
		return EncodeCoord(x)
	}
	for name, p := range map[string][]byte{
		"empty":          nil,
		"oversized":      make([]byte, MaxCoordPayload+1),
		"version":        append([]byte{2}, b[1:]...),
		"truncated":      b[:len(b)-1],
		"trailing":       append(bytes.Clone(b), 0),
		"dimensions":     bad(func(x *coordinate.Coordinate) { x.Vec = x.Vec[:3] }),
		"infinite":       bad(func(x *coordinate.Coordinate) { x.Height = math.Inf(1) }),
		"nan":            bad(func(x *coordinate.Coordinate) { x.Error = math.NaN() }),
		"far":            bad(func(x *coordinate.Coordinate) { x.Vec[2] = -1e9 }),
		"negative error": bad(func(x *coordinate.Coordinate) { x.Error = -1 }),
	} {
		if _, err := DecodeCoord(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodeCoord(f *testing.F) {
	f.Add(EncodeCoord(coordinate.NewCoordinate(coordinate.DefaultConfig())))
	f.Add([]byte{1, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCoord(b)
		if err != nil {
			return
		}
		if checkCoord(c) != nil || !bytes.Equal(EncodeCoord(c), b) {
			t.Fatalf("accepted %x as %+v, which does not encode back", b, c)
		}
	})
}

// memberlist's handler-queue drops, which it only logs, are counted; its
// other lines are not.
func TestSwimCountsHandlerQueueDrops(t *testing.T) {
	s, err := NewSwim(SwimConfig{Self: Heartbeat{Host: "a", Incarnation: "1"}, Transport: &memberlist.MockTransport{}}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	w := swimLogWriter{s.log, &s.queueFull}
	for _, line := range []string{
		"[WARN] memberlist: handler queue full, dropping message (2) from=10.0.0.2:7946\n",
		"[WARN] memberlist: Was able to connect to b over TCP but UDP probes failed, network may be misconfigured\n",
		"[WARN] memberlist: handler queue full, dropping message (4) from=10.0.0.3:7946\n",
	} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.QueueFullDrops(); got != 2 {
		t.Errorf("%d drops counted, want 2", got)
	}
}
