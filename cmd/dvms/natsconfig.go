package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:      "nats-config",
		Usage:     "write the nats-server configuration that admits only the region's keys, each with its subject permissions",
		ArgsUsage: " ",
		Description: "Every agent key in --keys-dir (HOST.pub) becomes a NATS user that may read its own subjects and the\n" +
			"region's broadcasts and publish its own host summary only. Keys of tools (`dvms keygen` keys kept OUTSIDE\n" +
			"keys_dir), by role: --reader runs dvms status/events/plans; --scheduler-api reads the hosts' summaries;\n" +
			"--observer (an operator's tools) may do both, send dvms drain's notice and the run-time controls.\n" +
			"A tool reads only the request inboxes of its own key. Agents then set [nats] nkey_auth = true; tools\n" +
			"[operator] nkey_seed (dvms status, the controls), [nats] nkey_seed (scheduler-api) or --nats-nkey.\n" +
			"Include the output in nats-server.conf (or run nats-server -c on it) and restart NATS when a key is\n" +
			"added or removed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "keys-dir", Required: true, Usage: "the region's keys `DIR` (the agents' keys_dir)"},
			&cli.StringFlag{Name: "region", EnvVars: []string{"DVMS_REGION"}, Value: "RegionOne", Usage: "dvms `REGION`"},
			&cli.StringSliceFlag{Name: "observer", Usage: "public key `FILE` (NAME.pub) of an operator's tools (status, controls, drain notice, scheduler-api); repeatable"},
			&cli.StringSliceFlag{Name: "reader", Usage: "public key `FILE` (NAME.pub) of a read-only tool (dvms status, events, plans); repeatable"},
			&cli.StringSliceFlag{Name: "scheduler-api", Usage: "public key `FILE` (NAME.pub) of a dvms scheduler-api (summaries only); repeatable"},
			&cli.StringFlag{Name: "listen", Usage: "`HOST:PORT` for the server's client listener (optional)"},
			&cli.StringFlag{Name: "tls-cert", Usage: "the server's TLS certificate `FILE` (optional; clients then set tls_ca)"},
			&cli.StringFlag{Name: "tls-key", Usage: "the server's TLS key `FILE` (with --tls-cert)"},
		},
		Action: func(c *cli.Context) error {
			if (c.String("tls-cert") == "") != (c.String("tls-key") == "") {
				return usageError(fmt.Errorf("--tls-cert and --tls-key go together"))
			}
			tools := map[string][]string{}
			for _, r := range auth.ToolRoles {
				tools[r.Name] = c.StringSlice(r.Name)
			}
			sc, err := auth.NATSServerConfig(c.String("keys-dir"), c.String("region"), tools)
			if err != nil {
				return err
			}
			sc.Listen, sc.TLSCert, sc.TLSKey = c.String("listen"), c.String("tls-cert"), c.String("tls-key")
			_, err = fmt.Fprint(c.App.Writer, sc.Render())
			return err
		},
	})
}

// natsAuthFlags are the operator commands' NATS nkey (an observer key of
// `dvms nats-config`) and the CA of a NATS server that speaks TLS.
func natsAuthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "nats-nkey", EnvVars: []string{"DVMS_NATS_NKEY"},
			Usage: "nkeys seed `FILE` to authenticate to NATS with (an observer key of dvms nats-config; optional)"},
		&cli.StringFlag{Name: "nats-ca", EnvVars: []string{"DVMS_NATS_TLS_CA"},
			Usage: "CA bundle `FILE` of a NATS server that speaks TLS (optional)"},
	}
}

// withNATSAuth applies natsAuthFlags to bc.
func withNATSAuth(c *cli.Context, bc bus.Config) bus.Config {
	bc.NkeySeedFile, bc.TLSCA = c.String("nats-nkey"), c.String("nats-ca")
	return bc
}
