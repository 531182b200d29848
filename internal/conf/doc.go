package conf

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Doc is one option as the sample and the reference show it.
type Doc struct {
	Section, Name string
	// Type is Spec.Describe's text.
	Type string
	// Default as written in the file ("" = empty).
	Default string
	Help    string
	// Env is the environment variable that overrides it; Flag the
	// command-line flag ("" = none), shown as `Command --Flag`.
	Env, Flag string
}

// WriteSample writes the sample configuration: header as a comment, then
// every option of each section (in sections' order, rows in table order)
// commented out with its default.
func WriteSample(w io.Writer, header string, sections []string, rows []Doc) error {
	bw := bufio.NewWriter(w)
	comment(bw, header)
	for _, s := range sections {
		fmt.Fprintf(bw, "\n[%s]\n", s)
		for _, o := range rows {
			if o.Section != s {
				continue
			}
			fmt.Fprintln(bw)
			comment(bw, o.Help+" ("+o.Type+")")
			fmt.Fprintln(bw, strings.TrimRight("#"+o.Name+" = "+o.Default, " "))
		}
	}
	return bw.Flush()
}

// comment writes text as "# " lines of at most 79 columns; an empty
// line of text stays an empty comment line.
func comment(w io.Writer, text string) {
	for _, para := range strings.Split(text, "\n") {
		line := "#"
		for _, word := range strings.Fields(para) {
			if len(line)+1+len(word) > 79 && line != "#" {
				fmt.Fprintln(w, line)
				line = "#"
			}
			line += " " + word
		}
		fmt.Fprintln(w, line)
	}
}

// WriteReference writes the configuration reference (reStructuredText):
// the generated-file note and title, intro, then the same rows, help and
// defaults as the sample; command names the flags' command.
func WriteReference(w io.Writer, note, title, intro, command string, sections []string, rows []Doc) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "..")
	for _, l := range strings.Split(note, "\n") {
		fmt.Fprintln(bw, "   "+l)
	}
	fmt.Fprintln(bw)
	heading(bw, title, "=", true)
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, intro)
	for _, s := range sections {
		fmt.Fprintln(bw)
		heading(bw, "["+s+"]", "=", false)
		for _, o := range rows {
			if o.Section != s {
				continue
			}
			fmt.Fprintln(bw)
			fmt.Fprintf(bw, "``%s``\n", o.Name)
			def := "(empty)"
			if o.Default != "" {
				def = "``" + o.Default + "``"
			}
			fmt.Fprintf(bw, "   :Type: %s\n", RSTText(o.Type))
			fmt.Fprintf(bw, "   :Default: %s\n", def)
			fmt.Fprintf(bw, "   :Environment: ``%s``\n", o.Env)
			if o.Flag != "" {
				fmt.Fprintf(bw, "   :Flag: ``%s --%s``\n", command, o.Flag)
			}
			fmt.Fprintln(bw)
			indented(bw, RSTText(o.Help), "   ")
		}
	}
	return bw.Flush()
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

// RSTText makes the table's plain text safe as reStructuredText: `code`
// becomes a literal, and the characters reST gives a meaning inline
// (emphasis, substitutions, escapes) are escaped.
func RSTText(s string) string {
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
