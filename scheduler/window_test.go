package scheduler

import (
	"strings"
	"testing"
	"time"
)

func mustWindows(t *testing.T, s string) Windows {
	t.Helper()
	w, err := ParseWindows(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func paris(t *testing.T, date string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation("2006-01-02 15:04", date, loc)
	if err != nil {
		t.Fatal(err)
	}
	return at.UTC() // the agent's clock is UTC; the window says Paris
}

// A window closed for relief raises no OVERLOAD event, while a drain in
// the same window runs; the overload that still holds is raised when the
// window opens, from the samples taken while it was closed.
func TestClosedWindowHoldsOverloadNotDrain(t *testing.T) {
	cfg := DefaultConfig("h1")
	cfg.Windows = mustWindows(t, "overload=22:00-06:00 Europe/Paris")
	noon := paris(t, "2026-11-27 12:00") // a Friday
	a, err := NewAgent(cfg, ring5)
	if err != nil {
		t.Fatal(err)
	}
	now := noon
	for range 2 * cfg.N {
		now = now.Add(time.Second)
		a.Observe(now, hostWith("h1", 6))
		a.Tick(now)
	}
	if p := a.Partition(); p != nil {
		t.Fatalf("overload raised at noon, outside its window: %+v", p.Events)
	}
	if rs := records(a.Ready(), RecEventRaised); len(rs) != 0 {
		t.Fatalf("event records outside the window: %+v", rs)
	}

	// The same agent, same hour, the host drained: the drain runs.
	d := DefaultConfig("h2")
	d.Windows = cfg.Windows
	b, err := NewAgent(d, ring5)
	if err != nil {
		t.Fatal(err)
	}
	h := hostWith("h2", 6)
	h.Draining = true
	b.Observe(noon, h)
	if p := b.Partition(); p == nil || p.Events[0].Kind != Maintenance {
		t.Fatalf("drain held by the overload window: %+v", p)
	}

	// The window opens at 22:00 Paris: the next tick raises the overload
	// the last N samples still hold, with no new sample needed.
	open := paris(t, "2026-11-27 22:00")
	a.Tick(open.Add(-time.Minute))
	if a.Partition() != nil {
		t.Fatal("overload raised at 21:59 Paris")
	}
	a.Tick(open)
	if p := a.Partition(); p == nil || p.Events[0].Kind != Overload || !p.Events[0].Detected.Equal(open) {
		t.Fatalf("overload not raised when its window opened: %+v", p)
	}
}

// A drain window closed holds the drain; the overload window (always)
// is not touched by it.
func TestMaintenanceWindow(t *testing.T) {
	cfg := DefaultConfig("h1")
	cfg.Windows = mustWindows(t, "maintenance=mon-fri 08:00-18:00 UTC")
	a, err := NewAgent(cfg, ring5)
	if err != nil {
		t.Fatal(err)
	}
	sat := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	h := hostWith("h1", 1)
	h.Draining = true
	a.Observe(sat, h)
	if a.Partition() != nil {
		t.Fatal("drain raised on a Saturday, outside its window")
	}
	mon := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a.Observe(mon, h)
	if p := a.Partition(); p == nil || p.Events[0].Kind != Maintenance {
		t.Fatalf("drain not raised on Monday 08:00: %+v", p)
	}
}

func TestWindowOpen(t *testing.T) {
	utc := func(day, hh, mm int) time.Time { return time.Date(2026, 11, day, hh, mm, 0, 0, time.UTC) } // the 27th is a Friday
	for _, c := range []struct {
		spec string
		at   time.Time
		open bool
	}{
		{"22:00-06:00", utc(27, 21, 59), false},
		{"22:00-06:00", utc(27, 22, 0), true},
		{"22:00-06:00", utc(28, 5, 59), true},
		{"22:00-06:00", utc(28, 6, 0), false},
		{"00:00-24:00", utc(28, 23, 59), true},
		{"08:00-12:00 14:00-18:00", utc(27, 13, 0), false},
		{"08:00-12:00 14:00-18:00", utc(27, 14, 0), true},
		// A span crossing midnight belongs to the day it starts.
		{"fri 22:00-06:00", utc(28, 5, 0), true},  // Saturday morning
		{"fri 22:00-06:00", utc(27, 5, 0), false}, // Friday morning
		{"mon-fri 08:00-18:00", utc(28, 9, 0), false},
		{"mon-fri 08:00-18:00", utc(27, 9, 0), true},
		{"sat-mon 00:00-24:00", utc(29, 9, 0), true}, // Sunday: the range wraps
		{"08:00-09:00 Europe/Paris", utc(27, 7, 30), true},
		{"08:00-09:00 Europe/Paris", utc(27, 8, 30), false},
		// No moves in business hours (a freeze), weekends open.
		{"mon-fri 00:00-08:00 mon-fri 18:00-24:00 sat-sun 00:00-24:00", utc(30, 7, 59), true}, // Monday
		{"mon-fri 00:00-08:00 mon-fri 18:00-24:00 sat-sun 00:00-24:00", utc(30, 8, 0), false},
		{"mon-fri 00:00-08:00 mon-fri 18:00-24:00 sat-sun 00:00-24:00", utc(30, 18, 0), true},
		{"mon-fri 00:00-08:00 mon-fri 18:00-24:00 sat-sun 00:00-24:00", utc(28, 12, 0), true}, // Saturday
		{"always", utc(27, 3, 0), true},
		{"never", utc(27, 3, 0), false},
	} {
		w := mustWindows(t, "underload="+c.spec)
		if got := w.Open(Underload, c.at); got != c.open {
			t.Errorf("%s at %s: open %v, want %v", c.spec, c.at.Format(time.RFC1123), got, c.open)
		}
		if !w.Open(Overload, c.at) || !w.Open(Maintenance, c.at) {
			t.Errorf("%s: another kind's window closed", c.spec)
		}
		back := mustWindows(t, w.String())
		if back.String() != w.String() {
			t.Errorf("%s: written back %q reads as %q", c.spec, w.String(), back.String())
		}
		for _, at := range []time.Time{c.at, c.at.Add(12 * time.Hour), c.at.Add(36 * time.Hour)} {
			if back.Open(Underload, at) != w.Open(Underload, at) {
				t.Errorf("%s: written back as %q opens differently at %s", c.spec, w.String(), at)
			}
		}
	}
}

func TestWindowNext(t *testing.T) {
	w := mustWindows(t, "underload=22:00-06:00 Europe/Paris").Underload
	at, ok := w.Next(paris(t, "2026-11-27 12:34"))
	if !ok || !at.Equal(paris(t, "2026-11-27 22:00")) {
		t.Fatalf("next change %v %v, want 22:00 Paris", at, ok)
	}
	if _, ok := (Window{}).Next(t0); ok {
		t.Fatal("an always-open window changes")
	}
}

func TestParseWindowsErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"overload":                             "want KIND=SPEC",
		"relief=22:00-06:00":                   `kind "relief"`,
		"overload=22:00-6:00":                  `time "6:00"`,
		"overload=25:00-06:00":                 `time "25:00"`,
		"overload=24:00-06:00":                 `time "24:00"`,
		"overload=10:00-10:00":                 "empty range",
		"overload=22:00-06:00 Mars/Base":       `time zone "Mars/Base"`,
		"overload=mon-fri":                     "after them",
		"overload=":                            "empty",
		"overload=never, overload=22:00-06:00": "always or never",
	} {
		_, err := ParseWindows(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", spec, err, want)
		}
	}
	// Every bad entry is named, not only the first.
	_, err := ParseWindows("overload=x, underload=y")
	if err == nil || !strings.Contains(err.Error(), "overload=x") || !strings.Contains(err.Error(), "underload=y") {
		t.Errorf("errors: %v", err)
	}
}
