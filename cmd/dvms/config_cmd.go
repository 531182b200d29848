package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "config",
		Usage: "the agent's configuration: write the sample or the reference, check a file",
		Subcommands: []*cli.Command{
			{
				Name:   "sample",
				Usage:  "write the sample configuration (every option, commented out with its default)",
				Flags:  []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default: standard output)"}},
				Action: func(c *cli.Context) error { return writeOut(c, writeSample) },
			},
			{
				Name:   "reference",
				Usage:  "write the configuration reference (reStructuredText, doc/source/configuration/reference.rst)",
				Flags:  []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default: standard output)"}},
				Action: func(c *cli.Context) error { return writeOut(c, writeReference) },
			},
			{
				Name:  "check",
				Usage: "check a configuration as `dvms agent` would read it (file, DVMS_* environment) and list every problem",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "config", EnvVars: []string{"DVMS_CONFIG"}, Usage: "INI configuration file"},
					&cli.StringFlag{Name: "host", Value: "compute-1", Usage: "compute host the agent would run for"},
				},
				Action: func(c *cli.Context) error {
					if _, err := loadConfig(configSource{file: c.String("config"), env: os.LookupEnv}, c.String("host")); err != nil {
						return fmt.Errorf("configuration:\n%w", err)
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

Generated from the option table (cmd/dvms/options.go) by ` + "`dvms config sample`" + `
(go generate ./cmd/dvms): edit the table, not this file.

Every option is shown commented out with its default. DVMS_<SECTION>_<OPTION>
environment variables (DVMS_<OPTION> for [DEFAULT], e.g. DVMS_REGION,
DVMS_NATS_URL, DVMS_SCHEDULER_CPU_OVERLOAD) override this file; flags of
` + "`dvms agent`" + ` override both. Unknown sections and options, bad values and
values that contradict each other stop the agent at start, every problem
listed; ` + "`dvms config check --config FILE`" + ` lists them without starting.`

// writeSample writes the sample configuration from the option table.
func writeSample(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	comment(bw, sampleHeader)
	for _, s := range sections {
		fmt.Fprintf(bw, "\n[%s]\n", s)
		for i := range options {
			o := &options[i]
			if o.section != s {
				continue
			}
			fmt.Fprintln(bw)
			comment(bw, o.help+" ("+o.describe()+")")
			fmt.Fprintln(bw, strings.TrimRight("#"+o.name+" = "+o.def, " "))
		}
	}
}

// describe is the kind, unit and limits of o, as the sample shows them.
func (o *option) describe() string {
	parts := []string{string(o.kind)}
	if o.unit != "" {
		parts = append(parts, o.unit)
	}
	if len(o.choices) > 0 {
		parts = append(parts, "one of "+strings.Join(o.choices, ", "))
	}
	switch {
	case strings.HasPrefix(o.bounds, ">"):
		parts = append(parts, o.bounds)
	case o.bounds != "":
		parts = append(parts, "in "+o.bounds)
	}
	if o.required {
		parts = append(parts, "required")
	}
	return strings.Join(parts, ", ")
}

// comment writes text as "# " lines of at most 79 columns; an empty
// line of text stays an empty comment line.
func comment(w io.Writer, text string) {
	for _, para := range strings.Split(text, "\n") {
		line := "#"
		for _, word := range strings.Fields(para) {
			if len(line)+1+len(word) > 79 && line != "#" {
				fmt.Fprintln(w, line)
				line = "#"
			}
			line += " " + word
		}
		fmt.Fprintln(w, line)
	}
}
