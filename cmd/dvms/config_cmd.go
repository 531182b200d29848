package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/conf"
	"github.com/dvms-project/dvms/internal/daemon"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "config",
		Usage: "the agent's configuration: write the sample or the reference, check a file",
		Subcommands: []*cli.Command{
			{
				Name:   "sample",
				Usage:  "write the sample configuration (every option, commented out with its default)",
				Flags:  []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "`FILE` to write (default: standard output)"}},
				Action: func(c *cli.Context) error { return writeOut(c, writeSample) },
			},
			{
				Name:   "reference",
				Usage:  "write the configuration reference (reStructuredText, doc/source/configuration/reference.rst)",
				Flags:  []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "`FILE` to write (default: standard output)"}},
				Action: func(c *cli.Context) error { return writeOut(c, writeReference) },
			},
			{
				Name:  "check",
				Usage: "check a configuration as `dvms agent` would (files, DVMS_* environment, flags, keys) and list every problem",
				Description: "Runs the agent's own start-up check (the same function): every value, the rules between\n" +
					"options, keys_dir and the host's keys, arbiter = local only with --embedded-nats. Exit 78 when\n" +
					"the agent would refuse the configuration.",
				Flags: append(append(configFlags(),
					&cli.StringFlag{Name: "host", EnvVars: []string{"DVMS_HOST"}, Usage: "compute `HOST` the agent would run for (default: this machine's host name)"},
					&cli.BoolFlag{Name: "embedded-nats", Usage: "check as for `dvms agent --embedded-nats`"},
				), optionFlags()...),
				Action: func(c *cli.Context) error {
					cfg, err := agentConfig(c)
					if err == nil {
						err = daemon.StartChecks(cfg)
					}
					if err != nil {
						return daemon.ConfigError(fmt.Errorf("configuration:\n%w", err))
					}
					fmt.Fprintln(c.App.Writer, "configuration ok")
					return nil
				},
			},
		},
	})
}

// writeOut writes what gen writes to --output, or to standard output.
func writeOut(c *cli.Context, gen func(io.Writer)) error {
	var b bytes.Buffer
	gen(&b)
	if out := c.String("output"); out != "" {
		if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", out, err)
		}
		return nil
	}
	_, err := os.Stdout.Write(b.Bytes())
	return err
}

const sampleHeader = `dvms agent configuration (INI, oslo.config style).

Generated from the option table (internal/daemon/options.go) by
` + "`dvms config sample`" + ` (go generate ./cmd/dvms): edit the table, not this file.

Every option is shown commented out with its default. DVMS_<SECTION>_<OPTION>
environment variables (DVMS_<OPTION> for [DEFAULT], e.g. DVMS_REGION,
DVMS_NATS_URL, DVMS_SCHEDULER_CPU_OVERLOAD) override this file; flags of
` + "`dvms agent`" + ` override both. Unknown sections and options, bad values and
values that contradict each other stop the agent at start, every problem
listed; ` + "`dvms config check --config FILE`" + ` lists them without starting.`

// writeSample writes the sample configuration from the option table.
func writeSample(w io.Writer) { _ = conf.WriteSample(w, sampleHeader, daemon.Sections, daemon.Docs()) }

// configFlags are --config and --config-dir, for every command that
// reads the configuration.
func configFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: []string{"DVMS_CONFIG"}, Usage: "INI configuration `FILE`"},
		&cli.StringFlag{Name: "config-dir", EnvVars: []string{"DVMS_CONFIG_DIR"},
			Usage: "`DIR` of drop-in *.conf files read after --config in lexical order, each overriding the ones before"},
	}
}

// fileSource is where a command's configuration comes from: --config,
// --config-dir and the DVMS_* environment.
func fileSource(c *cli.Context) daemon.Source {
	return daemon.Source{File: c.String("config"), Dir: c.String("config-dir"), Env: os.LookupEnv}
}
