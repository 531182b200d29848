package main

import (
	"io"

	"github.com/dvms-project/dvms/internal/conf"
	"github.com/dvms-project/dvms/internal/daemon"
)

// The sample and the reference are generated from the option table
// (internal/daemon/options.go):
//go:generate go run . config sample --output ../../etc/dvms/dvms.conf.sample
//go:generate go run . config reference --output ../../doc/source/configuration/reference.rst

// referencePath is where the committed reference lives, from cmd/dvms.
const referencePath = "../../doc/source/configuration/reference.rst"

// referenceIntro opens doc/source/configuration/reference.rst.
const referenceIntro = `The agent reads an INI file (oslo.config style), by default
` + "``/etc/dvms/dvms.conf``" + `, then the ` + "``*.conf``" + ` files of the directory
` + "``--config-dir``" + ` names, in lexical order (drop-in overrides, as kolla and
OpenStack-Ansible write them). Every option is listed below with its type,
unit, limits and default, in the order of ` + "``etc/dvms/dvms.conf.sample``" + `,
which is generated from the same table. Booleans take true/false, yes/no,
on/off or 1/0, as oslo.config does.

An environment variable ` + "``DVMS_<SECTION>_<OPTION>``" + ` (` + "``DVMS_<OPTION>``" + ` for
` + "``[DEFAULT]``" + `) overrides the files, and the flags of ` + "``dvms agent``" + ` override
all. Unknown sections and options, bad values and values that contradict
each other stop the agent at start with every problem listed;
` + "``dvms config check --config FILE``" + ` runs the same checks without starting.`

// writeReference writes the configuration reference (reStructuredText)
// from the option table: the same rows, help and defaults as the sample.
func writeReference(w io.Writer) {
	_ = conf.WriteReference(w, "Generated from the option table (internal/daemon/options.go) by\n"+
		"`dvms config reference` (go generate ./cmd/dvms): edit the table, not this file.",
		"Configuration reference", referenceIntro, "dvms agent", daemon.Sections, daemon.Docs())
}
