package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
)

// reviver unshelves what preemption shelved once capacity returns.
type reviver interface {
	Run(ctx context.Context, busy func() bool) error
}

// newReviver: not wired yet (waits for runtime.Reviver).
func newReviver(cfg fileConfig, c nova.Client, d nova.DemandSource, log zerolog.Logger) (reviver, error) {
	return nil, nil
}
