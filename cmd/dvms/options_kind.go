package main

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kind is how an option's value is written and checked.
type kind string

const (
	kindString   kind = "string"
	kindName     kind = "name" // letters, digits, '-' and '_': safe in NATS subjects
	kindEnum     kind = "enum"
	kindBool     kind = "boolean"
	kindInt      kind = "integer"
	kindFloat    kind = "float"
	kindSeconds  kind = "seconds" // decimal seconds, e.g. 0.5
	kindRegexp   kind = "regexp"
	kindPath     kind = "path"
	kindNATSURLs kind = "NATS URLs" // comma separated nats://, tls://, ws:// or wss://
	kindHTTPURL  kind = "URL"       // http:// or https://
	kindAddr     kind = "host:port"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// set parses raw and stores it in o's field of c, or says what is wrong
// with it (c is then untouched).
func (o *option) set(c *fileConfig, raw string) error {
	if raw == "" && o.required {
		return errors.New("is required")
	}
	if len(o.choices) > 0 && !slices.Contains(o.choices, raw) {
		return fmt.Errorf("want one of %s", strings.Join(o.choices, ", "))
	}
	dst := o.field(c)
	switch o.kind {
	case kindBool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("want true or false")
		}
		*dst.(*bool) = b
	case kindInt:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return errors.New("want an integer")
		}
		if err := o.checkBounds(float64(n)); err != nil {
			return err
		}
		*dst.(*int) = n
	case kindFloat, kindSeconds:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("want a number")
		}
		if err := o.checkBounds(f); err != nil {
			return err
		}
		if o.kind == kindSeconds {
			*dst.(*time.Duration) = time.Duration(f * float64(time.Second))
		} else {
			*dst.(*float64) = f
		}
	case kindRegexp:
		re, err := regexp.Compile(raw)
		if err != nil {
			return err
		}
		*dst.(**regexp.Regexp) = re
	default:
		if err := checkText(o.kind, raw); err != nil {
			return err
		}
		*dst.(*string) = raw
	}
	return nil
}

// checkText checks the text kinds; "" (unset) passes.
func checkText(k kind, raw string) error {
	if raw == "" {
		return nil
	}
	switch k {
	case kindName:
		if !nameRE.MatchString(raw) {
			return errors.New("want letters, digits, '-' or '_' only")
		}
	case kindNATSURLs:
		for _, u := range strings.Split(raw, ",") {
			if err := checkURL(strings.TrimSpace(u), "nats", "tls", "ws", "wss"); err != nil {
				return err
			}
		}
	case kindHTTPURL:
		return checkURL(raw, "http", "https")
	case kindAddr:
		if _, _, err := parseHostPort(raw); err != nil {
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

// checkBounds checks x against o.bounds: "> a", ">= a", or an interval
// "(a, b]" whose round ends are open and square ends closed.
func (o *option) checkBounds(x float64) error {
	if o.bounds == "" {
		return nil
	}
	lo, hi, loOpen, hiOpen := parseBounds(o.bounds)
	if x < lo || x > hi || (loOpen && x == lo) || (hiOpen && x == hi) {
		if strings.HasPrefix(o.bounds, ">") {
			return fmt.Errorf("must be %s", o.bounds)
		}
		return fmt.Errorf("must be in %s", o.bounds)
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
