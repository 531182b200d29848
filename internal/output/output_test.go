package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// rec is a caller's own record type: a slice of them is a nested cell.
type rec []KV

func (r rec) Pairs() Map { return Map(r) }

func TestWriteTables(t *testing.T) {
	agents := Table{Name: "agents", Columns: []string{"Host", "State", "Members"}, Rows: [][]any{
		{"compute-1", "free", []string{"compute-1", "compute-2"}},
		{"compute-2", "in: yes", []string{}},
	}}
	events := Table{Name: "events", Columns: []string{"Event", "Actions"}, Rows: [][]any{
		{"e1", []rec{{{"server", "s1"}, {"outcome", "done"}}}},
	}}
	cases := []struct {
		format  string
		columns []string
		ts      []Table
		want    string
	}{
		{"value", nil, []Table{agents}, "compute-1 free compute-1 compute-2\ncompute-2 in: yes \n"},
		{"value", []string{"host"}, []Table{agents, events}, "compute-1\ncompute-2\n"},
		{"json", []string{"State"}, []Table{agents}, "[\n  {\n    \"State\": \"free\"\n  },\n  {\n    \"State\": \"in: yes\"\n  }\n]\n"},
		{"yaml", nil, []Table{agents}, "- Host: compute-1\n  State: free\n  Members:\n    - compute-1\n    - compute-2\n- Host: compute-2\n  State: \"in: yes\"\n  Members: []\n"},
		{"yaml", nil, []Table{events}, "- Event: e1\n  Actions:\n    - server: s1\n      outcome: done\n"},
		{"table", []string{"host", "members"}, []Table{agents},
			"+-----------+-----------+\n| Host      | Members   |\n+-----------+-----------+\n| compute-1 | compute-1 |\n|           | compute-2 |\n| compute-2 |           |\n+-----------+-----------+\n"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if err := Write(&b, c.format, c.columns, c.ts...); err != nil {
			t.Fatalf("%s %v: %v", c.format, c.columns, err)
		}
		if b.String() != c.want {
			t.Errorf("-f %s -c %v:\n got %q\nwant %q", c.format, c.columns, b.String(), c.want)
		}
	}
	var b bytes.Buffer
	var both map[string][]map[string]any
	if err := Write(&b, "json", nil, agents, events); err != nil || json.Unmarshal(b.Bytes(), &both) != nil || len(both["agents"]) != 2 || len(both["events"]) != 1 {
		t.Errorf("two tables as json: %v %s", err, b.String())
	}
	for _, bad := range []struct {
		f string
		c []string
	}{{"xml", nil}, {"table", []string{"nope"}}} {
		if err := Write(&b, bad.f, bad.c, agents); !errors.As(err, new(UsageError)) {
			t.Errorf("-f %s -c %v: %v, want a UsageError", bad.f, bad.c, err)
		}
	}
}
