package main

// The operator commands read dvms.conf's [operator] section (their own
// NATS identity and signing key) so that on a deployed controller
// `dvms status` needs no flag: --config (default /etc/dvms/dvms.conf) and
// --config-dir as the agent's; flags and their environment variables
// override the file.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
)

// defaultConfigFile is the file the operator commands read without
// --config (a variable for the tests); a missing one is no error.
var defaultConfigFile = "/etc/dvms/dvms.conf"

// operatorConfigFlag marks the --config flags of operator commands: a
// command that has one reads [operator] before it runs (newApp).
var operatorConfigFlag = map[cli.Flag]bool{}

// operatorConfigFlags are --config and --config-dir of an operator command.
func operatorConfigFlags() []cli.Flag {
	f := &cli.StringFlag{Name: "config", EnvVars: []string{"DVMS_CONFIG"}, Value: defaultConfigFile,
		Usage: "INI configuration `FILE`: its [operator] section gives these flags' defaults (a missing default file is skipped)"}
	operatorConfigFlag[f] = true
	return []cli.Flag{f, &cli.StringFlag{Name: "config-dir", EnvVars: []string{"DVMS_CONFIG_DIR"},
		Usage: "`DIR` of drop-in *.conf files read after --config in lexical order, each overriding the ones before"}}
}

// withOperatorConfig makes cmd and its subcommands that have the
// operator's --config read it before they run.
func withOperatorConfig(cmd *cli.Command) {
	for _, f := range cmd.Flags {
		if operatorConfigFlag[f] && cmd.Before == nil {
			cmd.Before = applyOperatorConfig
		}
	}
	for _, sub := range cmd.Subcommands {
		withOperatorConfig(sub)
	}
}

// operatorFlags are the flags [operator] gives defaults to, by option.
var operatorFlags = []struct{ flag, option string }{
	{"nats-url", "nats_url"}, {"nats-creds", "creds_file"}, {"nats-nkey", "nkey_seed"},
	{"nats-ca", "tls_ca"}, {"key", "signing_key"}, {"region", "region"}, {"keys-dir", "keys_dir"},
	{"message-window", "message_window"},
}

// operatorConfigFile is the file to read: --config, else the default
// when it exists ("" for none).
func operatorConfigFile(c *cli.Context) (string, error) {
	if c.IsSet("config") {
		return c.String("config"), nil
	}
	f, err := os.Open(defaultConfigFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, fs.ErrPermission):
		// An operator outside the group that reads it still has the flags.
		fmt.Fprintf(c.App.ErrWriter, "dvms: %s not read (%v): the flags' defaults apply\n", defaultConfigFile, err)
		return "", nil
	case err != nil:
		return "", err
	}
	_ = f.Close()
	return defaultConfigFile, nil
}

// applyOperatorConfig checks the operator flags given and sets those not
// given from the configuration: a bad flag is a usage error (exit 2), a
// bad file a configuration error (exit 78).
func applyOperatorConfig(c *cli.Context) error {
	has := map[string]bool{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			has[n] = true
		}
	}
	for _, f := range operatorFlags {
		if !has[f.flag] || !c.IsSet(f.flag) {
			continue
		}
		if f.option == "message_window" {
			continue // a duration flag: parsed by its flag, checked by its command
		}
		if err := checkOperatorValue(f.option, c.String(f.flag)); err != nil {
			return usageError(fmt.Errorf("--%s: %w", f.flag, err))
		}
	}
	file, err := operatorConfigFile(c)
	if err != nil {
		return daemon.ConfigError(fmt.Errorf("--config: %w", err))
	}
	op, err := daemon.LoadOperator(daemon.Source{File: file, Dir: c.String("config-dir"), Env: os.LookupEnv})
	if err != nil {
		return daemon.ConfigError(fmt.Errorf("configuration %s:\n%w", file, err))
	}
	from := map[string]string{"nats_url": op.NATSURL, "creds_file": op.CredsFile, "nkey_seed": op.NkeySeed,
		"tls_ca": op.TLSCA, "signing_key": op.SigningKey, "region": op.Region, "keys_dir": op.KeysDir}
	if op.MessageWindow > 0 {
		from["message_window"] = op.MessageWindow.String()
	}
	for _, f := range operatorFlags {
		if v := from[f.option]; v != "" && has[f.flag] && !c.IsSet(f.flag) {
			if err := c.Set(f.flag, v); err != nil {
				return fmt.Errorf("--%s from [operator] %s: %w", f.flag, f.option, err)
			}
		}
	}
	return nil
}

// checkOperatorValue checks a flag's value against its option's row; a
// file must exist.
func checkOperatorValue(option, raw string) error {
	if err := daemon.CheckValue("operator", option, raw); err != nil || raw == "" {
		return err
	}
	switch option {
	case "creds_file", "nkey_seed", "tls_ca", "signing_key":
		if _, err := os.Stat(raw); err != nil {
			return err
		}
	}
	return nil
}
