// Package conf is the machinery under dvms's option table: how a value
// of each kind is written and checked (Spec.Parse), how the INI file and
// its drop-in directory are read (Read), and how the sample file and the
// reStructuredText reference are written from the table's rows (Sample,
// Reference). The table itself (which options exist, their defaults,
// help and destinations) is the agent's: internal/daemon/options.go.
package conf

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dvms-project/dvms/internal/netaddr"
)

// Kind is how an option's value is written and checked.
type Kind string

const (
	String   Kind = "string"
	Name     Kind = "name" // letters, digits, '-' and '_': safe in NATS subjects
	Enum     Kind = "enum"
	Bool     Kind = "boolean"
	Int      Kind = "integer"
	Float    Kind = "float"
	Seconds  Kind = "seconds" // decimal seconds, e.g. 0.5
	Regexp   Kind = "regexp"
	Path     Kind = "path"
	NATSURLs Kind = "NATS URLs" // comma separated nats://, tls://, ws:// or wss://
	HTTPURL  Kind = "URL"       // http:// or https://
	Addr     Kind = "host:port"
	// TimeWindows: event kinds and when they may be raised
	// (scheduler.ParseWindows); the destination reads the text itself
	// (encoding.TextUnmarshaler).
	TimeWindows Kind = "time windows"
)

// Spec is what a value must be: its kind, bounds, choices, whether it may
// be empty.
type Spec struct {
	Kind Kind
	// Bounds of a number: "> 0", ">= 1", "(0, 1]", "[0, 1)"; "" = any.
	Bounds string
	// Choices the value must be one of (kind Enum, or a number like voters).
	Choices []string
	// Required: the empty value is refused.
	Required bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// MaxSeconds is the longest duration a Seconds value may give: a
// time.Duration holds about 292 years of nanoseconds, and a value past it
// would wrap around (1e10 seconds became a negative window). A hundred
// years is past every sensible setting and far from the wrap.
const MaxSeconds = 100 * 365 * 24 * 3600

// Parse parses raw and stores it in dst, whose type the kind decides:
// *bool, *int, *float64, *time.Duration (Seconds), **regexp.Regexp, an
// encoding.TextUnmarshaler (TimeWindows), or *string for the text kinds. On error dst is untouched.
func (s Spec) Parse(raw string, dst any) error {
	if raw == "" && s.Required {
		return errors.New("is required")
	}
	if len(s.Choices) > 0 && !slices.Contains(s.Choices, raw) {
		return fmt.Errorf("want one of %s", strings.Join(s.Choices, ", "))
	}
	switch s.Kind {
	case Bool:
		b, err := ParseBool(raw)
		if err != nil {
			return err
		}
		*dst.(*bool) = b
	case Int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return errors.New("integer out of range")
			}
			return errors.New("want an integer")
		}
		if err := s.checkBounds(float64(n)); err != nil {
			return err
		}
		*dst.(*int) = n
	case Float, Seconds:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("want a number")
		}
		if err := s.checkBounds(f); err != nil {
			return err
		}
		if s.Kind == Float {
			*dst.(*float64) = f
			return nil
		}
		if math.Abs(f) > MaxSeconds {
			return fmt.Errorf("out of range: at most %d seconds (100 years)", MaxSeconds)
		}
		d := time.Duration(f * float64(time.Second))
		if f > 0 && d <= 0 {
			return errors.New("below a nanosecond")
		}
		*dst.(*time.Duration) = d
	case TimeWindows:
		return dst.(encoding.TextUnmarshaler).UnmarshalText([]byte(raw))
	case Regexp:
		re, err := regexp.Compile(raw)
		if err != nil {
			return err
		}
		*dst.(**regexp.Regexp) = re
	default:
		if err := checkText(s.Kind, raw); err != nil {
			return err
		}
		*dst.(*string) = raw
	}
	return nil
}

// ParseBool reads a boolean as oslo.config does: true, yes, on, 1 and
// false, no, off, 0, in any case.
func ParseBool(raw string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, errors.New("want true or false (yes/no, on/off, 1/0)")
}

// checkText checks the text kinds; "" (unset) passes.
func checkText(k Kind, raw string) error {
	if raw == "" {
		return nil
	}
	switch k {
	case Name:
		if !nameRE.MatchString(raw) {
			return errors.New("want letters, digits, '-' or '_' only")
		}
	case NATSURLs:
		for _, u := range strings.Split(raw, ",") {
			if err := checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss"); err != nil {
				return err
			}
		}
	case HTTPURL:
		return checkURL(raw, "http", "https")
	case Addr:
		if _, _, err := netaddr.ParseHostPort(raw); err != nil {
			return fmt.Errorf("want host:port: %w", err)
		}
	}
	return nil
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		return fmt.Errorf("want %s://HOST[:PORT]", strings.Join(schemes, "|"))
	}
	return nil
}

// checkBounds checks x against s.Bounds: "> a", ">= a", or an interval
// "(a, b]" whose round ends are open and square ends closed.
func (s Spec) checkBounds(x float64) error {
	if s.Bounds == "" {
		return nil
	}
	lo, hi, loOpen, hiOpen := parseBounds(s.Bounds)
	if x < lo || x > hi || (loOpen && x == lo) || (hiOpen && x == hi) {
		if strings.HasPrefix(s.Bounds, ">") {
			return fmt.Errorf("must be %s", s.Bounds)
		}
		return fmt.Errorf("must be in %s", s.Bounds)
	}
	return nil
}

// parseBounds reads a bounds spec; a malformed one is a bug in the
// table, which every test that loads a configuration finds.
func parseBounds(spec string) (lo, hi float64, loOpen, hiOpen bool) {
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			panic(fmt.Sprintf("option table: bounds %q", spec))
		}
		return f
	}
	switch {
	case strings.HasPrefix(spec, ">="):
		return num(spec[2:]), math.Inf(1), false, false
	case strings.HasPrefix(spec, ">"):
		return num(spec[1:]), math.Inf(1), true, false
	}
	a, b, ok := strings.Cut(spec, ",")
	if !ok || len(a) < 2 || len(b) < 2 {
		panic(fmt.Sprintf("option table: bounds %q", spec))
	}
	return num(a[1:]), num(b[:len(b)-1]), a[0] == '(', b[len(b)-1] == ')'
}

// Describe is the kind, unit and limits, as the sample and the reference
// show them.
func (s Spec) Describe(unit string) string {
	parts := []string{string(s.Kind)}
	if unit != "" {
		parts = append(parts, unit)
	}
	if len(s.Choices) > 0 {
		parts = append(parts, "one of "+strings.Join(s.Choices, ", "))
	}
	switch {
	case strings.HasPrefix(s.Bounds, ">"):
		parts = append(parts, s.Bounds)
	case s.Bounds != "":
		parts = append(parts, "in "+s.Bounds)
	}
	if s.Required {
		parts = append(parts, "required")
	}
	return strings.Join(parts, ", ")
}
