package daemon

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Operator is the [operator] section: how the operator commands (dvms
// status, events, plans, pause, resume, mode, exclude, include, drain)
// reach the agents, so that on a deployed controller they need no flag.
// An empty value leaves the command's flag default.
type Operator struct {
	NATSURL    string
	CredsFile  string
	NkeySeed   string
	TLSCA      string
	SigningKey string
	Region     string
	// KeysDir holds the agents' public keys: their status answers are
	// verified against them.
	KeysDir string
	// MessageWindow is the agents' [DEFAULT] message_window when the
	// configuration sets it (0 otherwise): dvms events --follow drops a
	// signed update further than this from its clock, as an agent would.
	MessageWindow time.Duration
}

// operatorUses are the options LoadOperator reads: the section, and the
// agents' options it falls back to.
func operatorUses(o *Option) bool {
	switch o.section + " " + o.name {
	case "DEFAULT region", "DEFAULT keys_dir", "DEFAULT message_window", "nats url", "nats tls_ca":
		return true
	}
	return o.section == "operator"
}

// LoadOperator reads the [operator] section from src, falling back to
// [nats] url, [nats] tls_ca and [DEFAULT] region where the file or the
// environment set them. Problems of the file itself (unknown sections
// and options, syntax) are errors, bad values only in the options read:
// an agent's option is `dvms config check`'s business. Every file the
// section names must exist.
func LoadOperator(src Source) (Operator, error) {
	c, eff, errs, err := read(src, "", operatorUses)
	if err != nil {
		return Operator{}, err
	}
	op := c.Operator
	set := func(section, name string) bool { _, ok := eff[LookupOption(section, name)]; return ok }
	if op.NATSURL == "" && set("nats", "url") {
		op.NATSURL = c.NATSURL
	}
	if op.TLSCA == "" && set("nats", "tls_ca") {
		op.TLSCA = c.TLSCA
	}
	if op.Region == "" && set("DEFAULT", "region") {
		op.Region = c.Runtime.Region
	}
	if op.KeysDir == "" && set("DEFAULT", "keys_dir") {
		op.KeysDir = c.KeysDir
	}
	if set("DEFAULT", "message_window") {
		op.MessageWindow = c.MessageWindow
	}
	for _, f := range []struct{ name, path string }{
		{"creds_file", op.CredsFile}, {"nkey_seed", op.NkeySeed}, {"tls_ca", op.TLSCA}, {"signing_key", op.SigningKey}, {"keys_dir", op.KeysDir},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("[operator] %s: %w", f.name, err))
		}
	}
	return op, errors.Join(errs...)
}

// CheckValue checks raw against the row of [section] name, as the
// loader would (a flag that stands for an option).
func CheckValue(section, name, raw string) error {
	o := LookupOption(section, name)
	if o == nil {
		return fmt.Errorf("[%s] %s: no such option", section, name)
	}
	var c Config
	return o.set(&c, raw)
}
