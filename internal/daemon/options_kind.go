package daemon

import "github.com/dvms-project/dvms/internal/conf"

// kind is how an option's value is written and checked (internal/conf).
type kind = conf.Kind

const (
	kindString   = conf.String
	kindName     = conf.Name
	kindEnum     = conf.Enum
	kindBool     = conf.Bool
	kindInt      = conf.Int
	kindFloat    = conf.Float
	kindSeconds  = conf.Seconds
	kindRegexp   = conf.Regexp
	kindPath     = conf.Path
	kindNATSURLs = conf.NATSURLs
	kindHTTPURL  = conf.HTTPURL
	kindAddr     = conf.Addr
	kindWindows  = conf.TimeWindows
)

// spec is what o's value must be.
func (o *Option) spec() conf.Spec {
	return conf.Spec{Kind: o.kind, Bounds: o.bounds, Choices: o.choices, Required: o.required}
}

// set parses raw and stores it in o's field of c, or says what is wrong
// with it (c is then untouched).
func (o *Option) set(c *Config, raw string) error { return o.spec().Parse(raw, o.field(c)) }

// doc is o as the sample and the reference show it.
func (o *Option) doc() conf.Doc {
	return conf.Doc{Section: o.section, Name: o.name, Type: o.spec().Describe(o.unit), Default: o.def, Help: o.help, Env: o.EnvName(), Flag: o.flag}
}

// docs are the table's rows for the sample and the reference.
func Docs() []conf.Doc {
	out := make([]conf.Doc, len(Options))
	for i := range Options {
		out[i] = Options[i].doc()
	}
	return out
}
