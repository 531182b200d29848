package main

import (
	"bytes"
	"testing"

	"github.com/urfave/cli/v2"
)

// The global --log-level applies to a command unless the command's own
// --log-level is given; a global level that is no level is a usage error.
func TestGlobalLogLevel(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   string
		wantOK bool
	}{
		{[]string{"x", "own"}, "", false},
		{[]string{"x", "--log-level", "debug", "own"}, "debug", true},
		{[]string{"x", "--log-level", "debug", "own", "--log-level", "warn"}, "warn", true},
		{[]string{"x", "own", "--log-level", "error"}, "error", true},
		{[]string{"x", "--log-level", "warn", "none"}, "warn", true},
	} {
		var got string
		var ok bool
		record := func(c *cli.Context) error { got, ok = logLevel(c); return nil }
		app := &cli.App{Flags: []cli.Flag{logLevelFlag}, Before: checkGlobalLogLevel, Commands: []*cli.Command{
			{Name: "own", Flags: []cli.Flag{&cli.StringFlag{Name: "log-level", Value: "info"}}, Action: record},
			{Name: "none", Action: record},
		}}
		if err := app.Run(tc.args); err != nil {
			t.Fatal(err)
		}
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%q: logLevel = %q, %v; want %q, %v", tc.args, got, ok, tc.want, tc.wantOK)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"dvms", "--log-level", "loud", "status"}, &out, &errOut); code != exitUsage {
		t.Errorf("--log-level loud: exit %d, want %d (%s)", code, exitUsage, errOut.String())
	}
}

// dvms --log-level LEVEL agent sets the agent's [DEFAULT] log_level; the
// agent's own flag wins.
func TestGlobalLogLevelReachesTheAgent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dvms", "--log-level", "debug", "agent"}, "debug"},
		{[]string{"dvms", "--log-level", "debug", "agent", "--log-level", "error"}, "error"},
		{[]string{"dvms", "agent"}, "info"},
	} {
		var got string
		app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
		for _, c := range app.Commands {
			if c.Name == "agent" {
				// The commands are the package's: put the real action back
				// for the tests that run the agent after this one.
				action := c.Action
				t.Cleanup(func() { c.Action = action })
				c.Action = func(c *cli.Context) error {
					cfg, _ := agentConfig(c)
					got = cfg.LogLevel
					return nil
				}
			}
		}
		args := append(tc.args, "--host", "c1", "--os-cloud", "x")
		if err := app.Run(args); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q: log_level %q, want %q", tc.args, got, tc.want)
		}
	}
}
