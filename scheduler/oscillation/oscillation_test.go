package oscillation

import (
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestHostRelievedNTimesInWindow(t *testing.T) {
	c := newClock()
	d := New(Config{Events: 3, Window: 30 * time.Minute}, c.now)
	for i := range 2 {
		if _, ok := d.Relieved("h1"); ok {
			t.Fatalf("relief %d: detected before 3 reliefs", i+1)
		}
		c.advance(10 * time.Minute)
	}
	det, ok := d.Relieved("h1") // at +20 min: 3 reliefs within 30 min
	if !ok {
		t.Fatal("3 reliefs in 20 min: no detection")
	}
	if det.Kind != HostRelieved || det.Host != "h1" || det.Count != 3 || det.Window != 30*time.Minute {
		t.Fatalf("detection = %+v", det)
	}
	if got := d.Recent(); got != 1 {
		t.Fatalf("Recent = %d, want 1", got)
	}
	// Counted afresh: the next relief alone is no oscillation.
	if _, ok := d.Relieved("h1"); ok {
		t.Fatal("a 4th relief right after a detection: detected again")
	}
	c.advance(31 * time.Minute)
	if got := d.Recent(); got != 0 {
		t.Fatalf("Recent after the window = %d, want 0", got)
	}
}

func TestHostRelievedSpreadOutIsNoOscillation(t *testing.T) {
	c := newClock()
	d := New(Config{Events: 3, Window: 30 * time.Minute}, c.now)
	for i := range 6 {
		if _, ok := d.Relieved("h1"); ok {
			t.Fatalf("relief %d, 16 min apart: detected", i+1)
		}
		c.advance(16 * time.Minute) // two fit within 30 min, never three
	}
}

func TestServerMovedBack(t *testing.T) {
	c := newClock()
	d := New(Config{Events: 3, Window: 30 * time.Minute}, c.now)
	if _, ok := d.Moved("s1", "a", "b"); ok {
		t.Fatal("first move: detected")
	}
	c.advance(5 * time.Minute)
	if _, ok := d.Moved("s2", "b", "a"); ok {
		t.Fatal("another server b→a: detected")
	}
	if _, ok := d.Moved("s1", "b", "c"); ok {
		t.Fatal("s1 b→c (not back): detected")
	}
	c.advance(5 * time.Minute)
	det, ok := d.Moved("s1", "c", "b")
	if !ok {
		t.Fatal("s1 b→c then c→b within 5 min: no detection")
	}
	if det.Kind != ServerMovedBack || det.Server != "s1" || det.From != "c" || det.To != "b" || det.Host != "c" || det.Count != 2 {
		t.Fatalf("detection = %+v", det)
	}
	// Beyond the window: not an oscillation.
	d.Moved("s3", "a", "b")
	c.advance(31 * time.Minute)
	if _, ok := d.Moved("s3", "b", "a"); ok {
		t.Fatal("moved back after 31 min (window 30): detected")
	}
	if got := d.Recent(); got != 0 {
		t.Fatalf("Recent = %d, want 0 (the detection is 31 min old)", got)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Events: 1, Window: time.Minute}, {Events: 3}} {
		if c.Validate() == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}
