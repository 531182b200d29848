package scheduler

// Time windows per event kind: when an agent may raise OVERLOAD,
// UNDERLOAD and MAINTENANCE events (Config.Windows).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	// The agents' hosts and containers may have no zone database; the
	// windows name zones (Europe/Paris), so the binary carries it
	// (about 450 KB).
	_ "time/tzdata"
)

// Windows says when each event kind may be raised. The zero value (and a
// kind not listed) is always open. Outside its kind's window an agent
// keeps sampling and raises no event of that kind; a condition that
// still holds K of N samples when the window opens is raised then.
// An event raised inside its window runs to its end if the window
// closes meanwhile; no new one (nor a retry) is raised until it opens.
type Windows struct {
	Overload, Underload, Maintenance Window
}

// Window is the union of its spans; the zero Window is always open.
type Window struct {
	// Never: the kind is never raised ("never").
	Never bool
	// Spans: open while any of them holds (none: always open).
	Spans []Span
}

// Span is a daily time range of wall-clock minutes [From, To) in Loc, on
// the days of Days (bit d for time.Weekday d; 0 = every day). To <= From
// crosses midnight: the span starts on one of its days and ends the next
// morning.
type Span struct {
	Days     uint8
	From, To int // minutes since midnight; To up to 24*60
	Loc      *time.Location
}

// For is kind's window (the zero Window, always open, for NoEvent).
func (w Windows) For(k EventKind) Window {
	switch k {
	case Overload:
		return w.Overload
	case Underload:
		return w.Underload
	case Maintenance:
		return w.Maintenance
	}
	return Window{}
}

// Open says whether kind k may be raised at now.
func (w Windows) Open(k EventKind, now time.Time) bool { return w.For(k).Open(now) }

// Always: the window never closes.
func (w Window) Always() bool { return !w.Never && len(w.Spans) == 0 }

// Open says whether the window holds at now.
func (w Window) Open(now time.Time) bool {
	if w.Never {
		return false
	}
	if len(w.Spans) == 0 {
		return true
	}
	for _, s := range w.Spans {
		if s.holds(now) {
			return true
		}
	}
	return false
}

// Next is when the window next opens or closes after now, to the minute,
// looking a week and a day ahead; ok false if it does not change.
func (w Window) Next(now time.Time) (at time.Time, ok bool) {
	if w.Never || len(w.Spans) == 0 {
		return time.Time{}, false
	}
	open := w.Open(now)
	t := now.Truncate(time.Minute)
	for range 8 * 24 * 60 {
		t = t.Add(time.Minute)
		if w.Open(t) != open {
			return t, true
		}
	}
	return time.Time{}, false
}

func (s Span) holds(now time.Time) bool {
	lt := now.In(s.Loc)
	m := lt.Hour()*60 + lt.Minute()
	day := lt.Weekday()
	if s.From < s.To {
		return s.on(day) && m >= s.From && m < s.To
	}
	// Across midnight: the evening of a day of the span, or the morning
	// after one.
	return (s.on(day) && m >= s.From) || (s.on((day+6)%7) && m < s.To)
}

func (s Span) on(d time.Weekday) bool { return s.Days == 0 || s.Days&(1<<d) != 0 }

var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseWindows reads the [scheduler] windows option: entries
// "KIND=SPEC" separated by commas, KIND one of overload, underload,
// maintenance (a kind may appear more than once: its windows add up),
// SPEC "always", "never", or one or more "[DAYS] HH:MM-HH:MM" then an
// optional IANA time zone (UTC when left out); DAYS is a day (mon) or a
// range of days (mon-fri) for the range after it, which may cross
// midnight (22:00-06:00) and may end at 24:00. For example:
//
//	overload=always, underload=22:00-06:00 sat-sun 00:00-24:00 Europe/Paris
func ParseWindows(s string) (Windows, error) {
	var w Windows
	var errs []error
	seen := map[EventKind]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, spec, ok := strings.Cut(entry, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("window %q: want KIND=SPEC (overload=22:00-06:00 UTC)", entry))
			continue
		}
		var k EventKind
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "overload":
			k = Overload
		case "underload":
			k = Underload
		case "maintenance":
			k = Maintenance
		default:
			errs = append(errs, fmt.Errorf("window %q: kind %q: want overload, underload or maintenance", entry, strings.TrimSpace(name)))
			continue
		}
		win, err := parseWindow(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("window %q: %w", entry, err))
			continue
		}
		p := w.ptr(k)
		switch {
		case !seen[k]:
			*p = win
		case p.Never || win.Never || p.Always() || win.Always():
			errs = append(errs, fmt.Errorf("window %q: %s has always or never and another window", entry, k))
			continue
		default:
			p.Spans = append(p.Spans, win.Spans...)
		}
		seen[k] = true
	}
	return w, errors.Join(errs...)
}

// UnmarshalText reads w with ParseWindows (the option loader); w is
// untouched on error.
func (w *Windows) UnmarshalText(b []byte) error {
	v, err := ParseWindows(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// MarshalText writes w with String.
func (w Windows) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

func (w *Windows) ptr(k EventKind) *Window {
	switch k {
	case Overload:
		return &w.Overload
	case Underload:
		return &w.Underload
	}
	return &w.Maintenance
}

func parseWindow(spec string) (Window, error) {
	f := strings.Fields(spec)
	if len(f) == 1 {
		switch strings.ToLower(f[0]) {
		case "always":
			return Window{}, nil
		case "never":
			return Window{Never: true}, nil
		}
	}
	if len(f) == 0 {
		return Window{}, errors.New("empty: want always, never or HH:MM-HH:MM [zone]")
	}
	loc := time.UTC
	if last := f[len(f)-1]; !isRange(last) && !isDays(last) {
		l, err := time.LoadLocation(last)
		if err != nil && strings.Contains(last, ":") {
			_, _, err = parseRange(last) // a mistyped range, not a zone
			return Window{}, err
		}
		if err != nil {
			return Window{}, fmt.Errorf("time zone %q: %w", last, err)
		}
		loc, f = l, f[:len(f)-1]
	}
	var win Window
	var days uint8
	for i, tok := range f {
		if d, ok := parseDays(tok); ok {
			if days != 0 || i == len(f)-1 {
				return Window{}, fmt.Errorf("days %q: want a time range HH:MM-HH:MM after them", tok)
			}
			days = d
			continue
		}
		from, to, err := parseRange(tok)
		if err != nil {
			return Window{}, err
		}
		win.Spans = append(win.Spans, Span{Days: days, From: from, To: to, Loc: loc})
		days = 0
	}
	if len(win.Spans) == 0 {
		return Window{}, errors.New("no time range HH:MM-HH:MM")
	}
	return win, nil
}

func isRange(tok string) bool { _, _, err := parseRange(tok); return err == nil }

func isDays(tok string) bool { _, ok := parseDays(tok); return ok }

func parseRange(tok string) (from, to int, err error) {
	a, b, ok := strings.Cut(tok, "-")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want HH:MM-HH:MM, a day range (mon-fri) or a time zone last", tok)
	}
	if from, err = parseClock(a, false); err != nil {
		return 0, 0, err
	}
	if to, err = parseClock(b, true); err != nil {
		return 0, 0, err
	}
	if from == to {
		return 0, 0, fmt.Errorf("%q: an empty range (for all day write 00:00-24:00)", tok)
	}
	return from, to, nil
}

// parseClock reads HH:MM; 24:00 only as an end.
func parseClock(s string, end bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	switch {
	case !ok || err1 != nil || err2 != nil || len(hh) != 2 || len(mm) != 2:
		return 0, fmt.Errorf("time %q: want HH:MM", s)
	case h == 24 && m == 0 && end:
		return 24 * 60, nil
	case h < 0 || h > 23 || m < 0 || m > 59:
		return 0, fmt.Errorf("time %q: want 00:00 to 23:59 (24:00 as an end)", s)
	}
	return h*60 + m, nil
}

func parseDays(tok string) (uint8, bool) {
	a, b, isRange := strings.Cut(strings.ToLower(tok), "-")
	from, ok1 := dayIndex(a)
	to, ok2 := from, true
	if isRange {
		to, ok2 = dayIndex(b)
	}
	if !ok1 || !ok2 {
		return 0, false
	}
	var d uint8
	for i := from; ; i = (i + 1) % 7 {
		d |= 1 << i
		if i == to {
			return d, true
		}
	}
}

func dayIndex(s string) (int, bool) {
	for i, n := range dayNames {
		if s == n {
			return i, true
		}
	}
	return 0, false
}

// String writes w back in ParseWindows's syntax (kinds always open left
// out).
func (w Windows) String() string {
	var out []string
	for _, k := range []EventKind{Overload, Underload, Maintenance} {
		if win := w.For(k); !win.Always() {
			for _, spec := range win.specs() {
				out = append(out, strings.ToLower(k.String())+"="+spec)
			}
		}
	}
	return strings.Join(out, ", ")
}

// String is the window for people: its specs joined by "; ".
func (w Window) String() string { return strings.Join(w.specs(), "; ") }

// specs are the window in ParseWindows's SPEC syntax, one per run of
// spans in the same zone.
func (w Window) specs() []string {
	switch {
	case w.Never:
		return []string{"never"}
	case len(w.Spans) == 0:
		return []string{"always"}
	}
	var out []string
	var b strings.Builder
	for i, s := range w.Spans {
		if s.Days != 0 {
			b.WriteString(daysString(s.Days) + " ")
		}
		fmt.Fprintf(&b, "%02d:%02d-%02d:%02d ", s.From/60, s.From%60, s.To/60, s.To%60)
		if i == len(w.Spans)-1 || w.Spans[i+1].Loc.String() != s.Loc.String() {
			b.WriteString(s.Loc.String())
			out = append(out, b.String())
			b.Reset()
		}
	}
	return out
}

// daysString writes a span's days, a run of days (mon-fri) or one day.
func daysString(d uint8) string {
	if d == 0x7f {
		return "sun-sat"
	}
	start := 0
	for i := range 7 {
		if d&(1<<i) != 0 && d&(1<<((i+6)%7)) == 0 {
			start = i
		}
	}
	end := start
	for d&(1<<((end+1)%7)) != 0 {
		end = (end + 1) % 7
	}
	if end == start {
		return dayNames[start]
	}
	return dayNames[start] + "-" + dayNames[end]
}
