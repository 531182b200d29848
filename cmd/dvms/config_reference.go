package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// referencePath is where the committed reference lives, from cmd/dvms.
const referencePath = "../../doc/source/configuration/reference.rst"

// referenceIntro opens doc/source/configuration/reference.rst.
const referenceIntro = `The agent reads an INI file (oslo.config style), by default
` + "``/etc/dvms/dvms.conf``" + `. Every option is listed below with its type, unit,
limits and default, in the order of ` + "``etc/dvms/dvms.conf.sample``" + `, which is
generated from the same table.

An environment variable ` + "``DVMS_<SECTION>_<OPTION>``" + ` (` + "``DVMS_<OPTION>``" + ` for
` + "``[DEFAULT]``" + `) overrides the file, and the flags of ` + "``dvms agent``" + ` override
both. Unknown sections and options, bad values and values that contradict
each other stop the agent at start with every problem listed;
` + "``dvms config check --config FILE``" + ` lists them without starting.`

// writeReference writes the configuration reference (reStructuredText)
// from the option table: the same rows, help and defaults as the sample.
func writeReference(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintln(bw, "..")
	fmt.Fprintln(bw, "   Generated from the option table (cmd/dvms/options.go) by")
	fmt.Fprintln(bw, "   `dvms config reference` (go generate ./cmd/dvms): edit the table, not this file.")
	fmt.Fprintln(bw)
	heading(bw, "Configuration reference", "=", true)
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, referenceIntro)
	for _, s := range sections {
		fmt.Fprintln(bw)
		heading(bw, "["+s+"]", "=", false)
		for i := range options {
			o := &options[i]
			if o.section != s {
				continue
			}
			fmt.Fprintln(bw)
			fmt.Fprintf(bw, "``%s``\n", o.name)
			def := "(empty)"
			if o.def != "" {
				def = "``" + o.def + "``"
			}
			fmt.Fprintf(bw, "   :Type: %s\n", rstText(o.describe()))
			fmt.Fprintf(bw, "   :Default: %s\n", def)
			fmt.Fprintf(bw, "   :Environment: ``%s``\n", o.envName())
			if o.flag != "" {
				fmt.Fprintf(bw, "   :Flag: ``dvms agent --%s``\n", o.flag)
			}
			fmt.Fprintln(bw)
			indented(bw, rstText(o.help), "   ")
		}
	}
}

// heading writes title underlined (and overlined when over) with c.
func heading(w io.Writer, title, c string, over bool) {
	line := strings.Repeat(c, len(title))
	if over {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, title)
	fmt.Fprintln(w, line)
}

// rstText makes the table's plain text safe as reStructuredText: `code`
// becomes a literal, and the characters reST gives a meaning inline
// (emphasis, substitutions, escapes) are escaped.
func rstText(s string) string {
	var b strings.Builder
	parts := strings.Split(s, "`")
	for i, p := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("``" + p + "``")
			continue
		}
		if i%2 == 1 { // an unpaired backquote
			b.WriteString("\\`")
		}
		rs := []rune(p)
		for j, r := range rs {
			// A word's trailing underscore would make it a reference.
			trailing := r == '_' && (j == len(rs)-1 || !isWordRune(rs[j+1]))
			if strings.ContainsRune(`\*|`, r) || trailing {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isWordRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// indented writes text wrapped at 79 columns, each line after prefix.
func indented(w io.Writer, text, prefix string) {
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 79 && line != prefix {
			fmt.Fprintln(w, line)
			line = prefix
		}
		if line != prefix {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}
