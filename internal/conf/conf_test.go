package conf

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Booleans are read as oslo.config reads them.
func TestParseBoolAsOslo(t *testing.T) {
	for _, in := range []string{"true", "True", "YES", "yes", "on", "On", "1"} {
		if b, err := ParseBool(in); err != nil || !b {
			t.Errorf("ParseBool(%q) = %v, %v; want true", in, b, err)
		}
	}
	for _, in := range []string{"false", "FALSE", "no", "No", "off", "OFF", "0"} {
		if b, err := ParseBool(in); err != nil || b {
			t.Errorf("ParseBool(%q) = %v, %v; want false", in, b, err)
		}
	}
	for _, in := range []string{"", "2", "y", "t", "enabled", "yess"} {
		if _, err := ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q) accepted", in)
		}
	}
}

// A value that would wrap a time.Duration, or round to nothing, is
// refused with its reason; the destination is left as it was.
func TestSecondsOverflow(t *testing.T) {
	s := Spec{Kind: Seconds, Bounds: "> 0"}
	for _, c := range []struct {
		in   string
		want string // "" = accepted
		d    time.Duration
	}{
		{"30", "", 30 * time.Second},
		{"0.5", "", 500 * time.Millisecond},
		{"3153600000", "", 3153600000 * time.Second}, // 100 years
		{"1e10", "out of range", 0},
		{"9.3e9", "out of range", 0},
		{"1e300", "out of range", 0},
		{"1e-10", "below a nanosecond", 0},
		{"0", "must be > 0", 0},
		{"NaN", "want a number", 0},
		{"Inf", "want a number", 0},
	} {
		d := time.Duration(-1)
		err := s.Parse(c.in, &d)
		switch {
		case c.want == "" && (err != nil || d != c.d):
			t.Errorf("%q: %v, %v; want %v", c.in, d, err, c.d)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		case c.want != "" && d != -1:
			t.Errorf("%q: destination changed to %v on error", c.in, d)
		}
	}
	// Negative bounds do not exist in the table, but the wrap is refused
	// both ways.
	if err := (Spec{Kind: Seconds}).Parse("-1e10", new(time.Duration)); err == nil {
		t.Error("-1e10 seconds accepted")
	}
}

func TestIntOutOfRange(t *testing.T) {
	n := 7
	err := (Spec{Kind: Int, Bounds: ">= 1"}).Parse("99999999999999999999", &n)
	if err == nil || !strings.Contains(err.Error(), "out of range") || n != 7 {
		t.Errorf("huge integer: %v, n = %d", err, n)
	}
}

func TestBoundsAndKinds(t *testing.T) {
	for _, c := range []struct {
		s   Spec
		in  string
		ok  bool
		dst any
	}{
		{Spec{Kind: Float, Bounds: "(0, 1]"}, "1", true, new(float64)},
		{Spec{Kind: Float, Bounds: "(0, 1]"}, "0", false, new(float64)},
		{Spec{Kind: Float, Bounds: "[0, 1)"}, "1", false, new(float64)},
		{Spec{Kind: Int, Bounds: ">= 2"}, "1", false, new(int)},
		{Spec{Kind: Enum, Choices: []string{"a", "b"}}, "c", false, new(string)},
		{Spec{Kind: Name, Required: true}, "", false, new(string)},
		{Spec{Kind: Name}, "a.b", false, new(string)},
		{Spec{Kind: NATSURLs}, "nats://a:4222, tls://b", true, new(string)},
		{Spec{Kind: NATSURLs}, "http://a", false, new(string)},
		{Spec{Kind: Addr}, "h:99999", false, new(string)},
		{Spec{Kind: Regexp}, "(", false, new(*regexp.Regexp)},
	} {
		if err := c.s.Parse(c.in, c.dst); (err == nil) != c.ok {
			t.Errorf("%+v %q: %v", c.s, c.in, err)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The drop-in files of --config-dir come after the main file, in lexical
// order, *.conf only.
func TestReadDropIns(t *testing.T) {
	d := t.TempDir()
	main := filepath.Join(d, "dvms.conf")
	write(t, main, "[DEFAULT]\nregion = A\nsite = s1\n[nats]\nurl = nats://a:4222\n")
	dir := filepath.Join(d, "dvms.conf.d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "20-later.conf"), "[DEFAULT]\nregion = C\n")
	write(t, filepath.Join(dir, "10-first.conf"), "[DEFAULT]\nregion = B\n[empty]\n")
	write(t, filepath.Join(dir, "30-ignored.conf.bak"), "[DEFAULT]\nregion = X\n")
	write(t, filepath.Join(dir, ".hidden.conf"), "[DEFAULT]\nregion = Y\n")
	es, err := Read(main, dir)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]Entry{}
	var sections []string
	for _, e := range es {
		last[e.Section+"."+e.Key] = e
		sections = append(sections, e.Section)
	}
	if e := last["DEFAULT.region"]; e.Value != "C" || filepath.Base(e.File) != "20-later.conf" {
		t.Errorf("region = %+v, want C from 20-later.conf", e)
	}
	if e := last["DEFAULT.site"]; e.Value != "s1" || e.File != main {
		t.Errorf("site = %+v, want s1 from the main file", e)
	}
	if _, ok := last["empty."]; !ok {
		t.Errorf("an empty section is not reported: %v", sections)
	}
	if _, err := Read(main, filepath.Join(d, "missing")); err == nil {
		t.Error("a missing config dir is accepted")
	}
	if es, err := Read("", dir); err != nil || len(es) == 0 {
		t.Errorf("dir alone: %v, %d entries", err, len(es))
	}
}

func TestRSTText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"see `dvms keygen` for keys_dir", "see ``dvms keygen`` for keys_dir"},
		{"DVMS_ and a*b|c", "DVMS\\_ and a\\*b\\|c"},
	} {
		if got := RSTText(c.in); got != c.want {
			t.Errorf("RSTText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
