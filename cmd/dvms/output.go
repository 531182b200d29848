package main

// Output of the operator commands, as the openstack CLI formats it
// (internal/output): a table by default, -f json|yaml|value, -c COLUMN.

import (
	"errors"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/output"
)

// table is a list of rows under named columns (output.Table).
type table = output.Table

var formats = output.Formats

func outputFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "output `FORMAT`: table, json, yaml or value"},
		&cli.StringSliceFlag{Name: "column", Aliases: []string{"c"}, Usage: "show this `COLUMN` (repeat for more); default: all"},
	}
}

// writeTables writes ts in format, keeping only columns (all if none);
// a bad -f or -c is a usage error (exit 2).
func writeTables(w io.Writer, format string, columns []string, ts ...table) error {
	err := output.Write(w, format, columns, ts...)
	if u := (output.UsageError{}); errors.As(err, &u) {
		return usageError(u.Err)
	}
	return err
}

type kv struct {
	k string
	v any
}

// orderedMap is a nested record that keeps its keys' order.
type orderedMap []kv

// Pairs makes m an output.Record.
func (m orderedMap) Pairs() output.Map {
	out := make(output.Map, len(m))
	for i, e := range m {
		out[i] = output.KV{K: e.k, V: e.v}
	}
	return out
}
