package main

import (
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"
)

func parseLevel(s string) (zerolog.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		return zerolog.ParseLevel(s)
	}
	return zerolog.InfoLevel, fmt.Errorf("[DEFAULT] log_level %q: want debug, info, warn or error", s)
}

// newLogger builds the process logger: JSON or console on stderr.
func newLogger(level, format string) zerolog.Logger {
	lvl, _ := parseLevel(level)
	var w io.Writer = os.Stderr
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
