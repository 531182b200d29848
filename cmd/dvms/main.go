// Command dvms is the decentralized dynamic scheduler for OpenStack Nova:
// the agent sidecar, the simulator, the benchmark harness and the operator
// commands. Each command lives in its own file and registers itself in
// commands from an init function, so they can be worked on separately.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/urfave/cli/v2"
)

// version is the build's version, set with
// -ldflags "-X main.version=..." (devstack/pkg/build-deb.sh does: dvms
// --version, every agent's status and dvms_build_info show it).
var version = "dev"

// commands is filled by the init functions of this package's files.
var commands []*cli.Command

// Exit codes (doc/source/admin/index.rst, "Command line conventions"): 0 success, 1 the command failed,
// 2 the command line is wrong (usage printed), 78 (daemon.ExitConfig)
// the agent's configuration, keys or credentials are wrong.
const (
	exitFailed = 1
	exitUsage  = 2
)

// errUsage marks an error of the command line (exit 2).
type errUsage struct{ err error }

func (e errUsage) Error() string { return e.err.Error() }
func (e errUsage) Unwrap() error { return e.err }

func usageError(err error) error { return errUsage{err} }

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run until ctx ends (commands that follow stop then).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	daemon.Version = version
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "dvms:", err)
	if errors.As(err, new(errUsage)) {
		return exitUsage
	}
	if errors.As(err, new(daemon.ErrConfig)) {
		return daemon.ExitConfig
	}
	return exitFailed
}

func newApp(stdout, stderr io.Writer) *cli.App {
	slices.SortFunc(commands, func(a, b *cli.Command) int { return strings.Compare(a.Name, b.Name) })
	onUsage := func(_ *cli.Context, err error, _ bool) error { return usageError(err) }
	for _, c := range commands {
		c.OnUsageError = onUsage
		withOperatorConfig(c)
	}
	return &cli.App{
		Name:         "dvms",
		Usage:        "decentralized dynamic scheduler for OpenStack Nova",
		Version:      version,
		Commands:     commands,
		Flags:        []cli.Flag{logLevelFlag},
		Before:       checkGlobalLogLevel,
		Writer:       stdout,
		ErrWriter:    stderr,
		OnUsageError: onUsage,
		// dvms completion bash (manpage.go): the script asks the binary.
		EnableBashCompletion: true,
		// Exit codes are run's: urfave/cli must not exit on its own.
		ExitErrHandler: func(*cli.Context, error) {},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "dvms: no command %q (dvms --help lists them)\n", name)
			os.Exit(exitUsage)
		},
	}
}
