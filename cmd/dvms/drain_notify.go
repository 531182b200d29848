package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler/node"
)

// notifyFlags let `dvms drain` / `undrain` tell the host's agent at once,
// over NATS, instead of waiting for the region's maintenance watch (at
// most [monitor] service_watch_interval later). The agent re-reads the
// service from Nova before acting, so the notice needs no credentials.
func notifyFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "nats-url", EnvVars: []string{"DVMS_NATS_URL"}, Usage: "NATS `URL` of the agents: tell the host's agent at once (optional)"},
		&cli.StringFlag{Name: "region", EnvVars: []string{"DVMS_REGION"}, Value: "RegionOne", Usage: "dvms `REGION` of the agents (with --nats-url)"},
	}, append(natsAuthFlags(), operatorConfigFlags()...)...)
}

// notifyAgent publishes the service change of host; failures are logged
// (the watch sees the change anyway).
func notifyAgent(c *cli.Context, host string, disabled bool, reason string, log zerolog.Logger) {
	url := c.String("nats-url")
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(c.Context, 5*time.Second)
	defer cancel()
	bc := bus.DefaultConfig()
	bc.URL, bc.Name = url, "dvms-cli"
	tr, err := bus.ConnectNATS(ctx, withNATSAuth(c, bc))
	if err != nil {
		log.Warn().Err(err).Msg("could not tell the agent over NATS; the region's watch will see the change")
		return
	}
	defer func() { _ = tr.Close() }()
	s := nova.Service{Host: host, Status: nova.ServiceEnabled, State: nova.ServiceUp}
	if disabled {
		s.Status, s.DisabledReason = nova.ServiceDisabled, reason
	}
	data, err := node.EncodeServiceNotice(s, "dvms-cli")
	if err == nil {
		err = tr.Publish(ctx, bus.ServiceSubject(c.String("region"), host), data)
	}
	if err != nil {
		log.Warn().Err(err).Msg("could not tell the agent over NATS; the region's watch will see the change")
		return
	}
	log.Info().Str("host", host).Msg("agent told over NATS")
}
