package main

import (
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
)

// logLevelFlag is the global flag (dvms --log-level LEVEL COMMAND); a
// command's own --log-level, where it has one, wins over it.
var logLevelFlag = &cli.StringFlag{Name: "log-level", Usage: "log `LEVEL` of every command: debug, info, warn or error (a command's own --log-level wins; the agent's overrides [DEFAULT] log_level)"}

// logLevel is the level the command line asks for: the command's own
// --log-level if given, else the global one; ok false when neither is.
func logLevel(c *cli.Context) (level string, ok bool) {
	if c.IsSet("log-level") {
		return c.String("log-level"), true
	}
	for _, p := range c.Lineage()[1:] { // the app's context, above the command's
		if p.IsSet("log-level") {
			return p.String("log-level"), true
		}
	}
	return "", false
}

// checkGlobalLogLevel refuses a global --log-level that is no level.
func checkGlobalLogLevel(c *cli.Context) error {
	if c.IsSet("log-level") {
		if _, err := daemon.ParseLevel(c.String("log-level")); err != nil {
			return usageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String("log-level")))
		}
	}
	return nil
}

// newLogger builds the process logger: JSON or console on stderr.
func newLogger(level, format string) zerolog.Logger {
	lvl, _ := daemon.ParseLevel(level)
	var w io.Writer = os.Stderr
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
