package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus/auth"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "keygen",
		Usage: "create the message-signing key pair of one agent",
		Description: "Writes DIR/HOST.key (the private key, mode 0600: install it on HOST only, owned by the\n" +
			"agent's user) and DIR/HOST.pub (the public key: copy it to the keys_dir of every agent of\n" +
			"the region). Keys are NATS nkeys user keys. An existing key is never overwritten.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "host", Required: true, Usage: "compute `HOST` name of the agent (as Nova knows it)"},
			&cli.StringFlag{Name: "dir", Required: true, Usage: "`DIR` to write the key pair into"},
		},
		Action: func(c *cli.Context) error {
			s, err := auth.GenerateKey(c.String("dir"), c.String("host"))
			if err != nil {
				return err
			}
			dir := c.String("dir")
			fmt.Fprintf(c.App.Writer, "private key: %s\npublic key:  %s\n%s\n",
				filepath.Join(dir, s.Host()+auth.SeedExt), filepath.Join(dir, s.Host()+auth.PubExt), s.PublicKey())
			return nil
		},
	})
}
