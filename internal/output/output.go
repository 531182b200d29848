// Package output writes the operator commands' results, as the openstack CLI formats it: a
// table by default, -f json|yaml|value, -c COLUMN (repeatable) to keep
// some columns. A command's output is one or more named tables.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Table is a list of rows under named columns. A cell is a string, a
// number, a bool, a time.Time, a []string, or a slice of Records (nested
// records: JSON and YAML keep them, the table shows one line per record).
type Table struct {
	Name    string
	Columns []string
	Rows    [][]any
}

// Formats are the -f values.
var Formats = []string{"table", "json", "yaml", "value"}

// UsageError is an error of the command line (-f, -c).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Record is a nested record whose keys keep their order.
type Record interface{ Pairs() Map }

// KV is one key of a Map.
type KV struct {
	K string
	V any
}

// Map is a JSON / YAML object that keeps its keys' order.
type Map []KV

func (m Map) Pairs() Map { return m }

var recordType = reflect.TypeOf((*Record)(nil)).Elem()

// normalize turns Records and slices of them into Maps.
func normalize(c any) any {
	switch v := c.(type) {
	case nil, string, []string, Map, []Map, time.Time:
		return c
	case Record:
		return v.Pairs()
	}
	rv := reflect.ValueOf(c)
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Implements(recordType) {
		out := make([]Map, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface().(Record).Pairs()
		}
		return out
	}
	return c
}

// Write writes ts in format, keeping only columns (all if none). With
// one table, json and yaml give its list of rows; with several, an
// object of lists keyed by table name. A bad format or column is a
// UsageError.
func Write(w io.Writer, format string, columns []string, ts ...Table) error {
	if !slices.Contains(Formats, format) {
		return UsageError{fmt.Errorf("-f %q: want one of %s", format, strings.Join(Formats, ", "))}
	}
	ts, err := selectColumns(columns, ts)
	if err != nil {
		return err
	}
	for k := range ts {
		rows := make([][]any, len(ts[k].Rows))
		for i, r := range ts[k].Rows {
			rows[i] = make([]any, len(r))
			for j, c := range r {
				rows[i][j] = normalize(c)
			}
		}
		ts[k].Rows = rows
	}
	switch format {
	case "json":
		var v any
		if len(ts) == 1 {
			v = ts[0].records()
		} else {
			m := Map{}
			for _, t := range ts {
				m = append(m, KV{t.Name, t.records()})
			}
			v = m
		}
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		if len(ts) == 1 {
			writeYAML(w, 0, ts[0].records())
		} else {
			m := Map{}
			for _, t := range ts {
				m = append(m, KV{t.Name, t.records()})
			}
			writeYAML(w, 0, m)
		}
		return nil
	case "value":
		for _, t := range ts {
			for _, r := range t.Rows {
				cells := make([]string, len(r))
				for i, c := range r {
					cells[i] = strings.ReplaceAll(cellText(c), "\n", " ")
				}
				fmt.Fprintln(w, strings.Join(cells, " "))
			}
		}
		return nil
	}
	for i, t := range ts {
		if len(ts) > 1 {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s:\n", t.Name)
		}
		writeASCII(w, t)
	}
	return nil
}

// selectColumns keeps the named columns (case-insensitive) in each
// table; a name no table has is an error.
func selectColumns(columns []string, ts []Table) ([]Table, error) {
	if len(columns) == 0 {
		return ts, nil
	}
	known := map[string]bool{}
	out := make([]Table, len(ts))
	for k, t := range ts {
		var idx []int
		for _, c := range columns {
			for i, tc := range t.Columns {
				if strings.EqualFold(c, tc) {
					idx = append(idx, i)
					known[strings.ToLower(c)] = true
				}
			}
		}
		nt := Table{Name: t.Name}
		for _, i := range idx {
			nt.Columns = append(nt.Columns, t.Columns[i])
		}
		for _, r := range t.Rows {
			nr := make([]any, len(idx))
			for j, i := range idx {
				nr[j] = r[i]
			}
			nt.Rows = append(nt.Rows, nr)
		}
		out[k] = nt
	}
	// A table with none of the columns is left out.
	out = slices.DeleteFunc(out, func(t Table) bool { return len(t.Columns) == 0 })
	for _, c := range columns {
		if !known[strings.ToLower(c)] {
			var all []string
			for _, t := range ts {
				all = append(all, t.Columns...)
			}
			return nil, UsageError{fmt.Errorf("-c %q: no such column (columns: %s)", c, strings.Join(slices.Compact(all), ", "))}
		}
	}
	return out, nil
}

// MarshalJSON writes m's keys in order.
func (m Map) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.K)
		v, err := json.Marshal(e.V)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// records returns t's rows as objects keyed by column.
func (t Table) records() []Map {
	out := make([]Map, 0, len(t.Rows))
	for _, r := range t.Rows {
		m := make(Map, len(t.Columns))
		for i, c := range t.Columns {
			m[i] = KV{c, r[i]}
		}
		out = append(out, m)
	}
	return out
}

// cellText is a cell as the table shows it.
func cellText(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case []string:
		return strings.Join(v, "\n")
	case []Map:
		lines := make([]string, len(v))
		for i, m := range v {
			parts := make([]string, 0, len(m))
			for _, e := range m {
				if s := cellText(e.V); s != "" {
					parts = append(parts, s)
				}
			}
			lines[i] = strings.Join(parts, " ")
		}
		return strings.Join(lines, "\n")
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(time.RFC3339)
	}
	return fmt.Sprint(c)
}

// writeASCII draws t as the openstack CLI does (+---+ borders), cells of
// several lines on several lines.
func writeASCII(w io.Writer, t Table) {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = len(c)
	}
	cells := make([][][]string, len(t.Rows))
	for r, row := range t.Rows {
		cells[r] = make([][]string, len(row))
		for i, c := range row {
			lines := strings.Split(cellText(c), "\n")
			cells[r][i] = lines
			for _, l := range lines {
				width[i] = max(width[i], len([]rune(l)))
			}
		}
	}
	sep := "+"
	for _, n := range width {
		sep += strings.Repeat("-", n+2) + "+"
	}
	line := func(vals []string) {
		var b strings.Builder
		b.WriteByte('|')
		for i, v := range vals {
			b.WriteString(" " + v + strings.Repeat(" ", width[i]-len([]rune(v))) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, sep)
	line(t.Columns)
	fmt.Fprintln(w, sep)
	for _, row := range cells {
		n := 1
		for _, c := range row {
			n = max(n, len(c))
		}
		for k := 0; k < n; k++ {
			vals := make([]string, len(row))
			for i, c := range row {
				if k < len(c) {
					vals[i] = c[k]
				}
			}
			line(vals)
		}
	}
	fmt.Fprintln(w, sep)
}

var plainYAML = regexp.MustCompile(`^[A-Za-z_/.][A-Za-z0-9_./:@+-]*$`)

// yamlScalar writes a string plain when YAML reads it back as that
// string, else double-quoted (JSON's escapes are YAML's).
func yamlScalar(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~":
		return strconv.Quote(s)
	}
	if plainYAML.MatchString(s) {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// writeYAML is a small YAML block encoder for what tables hold.
func writeYAML(w io.Writer, indent int, v any) {
	pad := strings.Repeat("  ", indent)
	switch x := v.(type) {
	case Map:
		if len(x) == 0 {
			fmt.Fprintf(w, "%s{}\n", pad)
		}
		for _, e := range x {
			if isScalar(e.V) {
				fmt.Fprintf(w, "%s%s: %s\n", pad, yamlScalar(e.K), yamlValue(e.V))
				continue
			}
			fmt.Fprintf(w, "%s%s:\n", pad, yamlScalar(e.K))
			writeYAML(w, indent+1, e.V)
		}
	case []Map:
		if len(x) == 0 {
			fmt.Fprintf(w, "%s[]\n", pad)
		}
		for _, m := range x {
			var b strings.Builder
			writeYAML(&b, indent+1, m)
			s := b.String()
			// "- " replaces the first line's indentation.
			fmt.Fprintf(w, "%s- %s", pad, strings.TrimPrefix(s, pad+"  "))
		}
	case []string:
		if len(x) == 0 {
			fmt.Fprintf(w, "%s[]\n", pad)
		}
		for _, s := range x {
			fmt.Fprintf(w, "%s- %s\n", pad, yamlScalar(s))
		}
	default:
		fmt.Fprintf(w, "%s%s\n", pad, yamlValue(v))
	}
}

func isScalar(v any) bool {
	switch x := v.(type) {
	case Map:
		return false
	case []Map:
		return len(x) == 0
	case []string:
		return len(x) == 0
	}
	return true
}

func yamlValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return yamlScalar(x)
	case bool, int, int64, float64:
		return fmt.Sprint(x)
	case []Map, []string:
		return "[]"
	case time.Time:
		return yamlScalar(cellText(x))
	}
	return yamlScalar(fmt.Sprint(v))
}
