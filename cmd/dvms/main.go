// Command dvms is the decentralized dynamic scheduler for OpenStack Nova:
// the agent sidecar, the simulator, the benchmark harness and the operator
// commands. Each command lives in its own file and registers itself in
// commands from an init function, so they can be worked on separately.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is the build's version, set with
// -ldflags "-X main.version=..." (DevStack's plugin does).
var version = "dev"

// commands is filled by the init functions of this package's files.
var commands []*cli.Command

func main() {
	slices.SortFunc(commands, func(a, b *cli.Command) int { return strings.Compare(a.Name, b.Name) })
	app := &cli.App{
		Name:     "dvms",
		Usage:    "decentralized dynamic scheduler for OpenStack Nova",
		Commands: commands,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "dvms:", err)
		os.Exit(1)
	}
}
