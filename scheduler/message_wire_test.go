package scheduler

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Encode writes, byte for byte, what json.Marshal of the wire envelope
// writes (HTML escapes, unicode, nested snapshots and all).
func TestEncodeIsTheEnvelopesJSON(t *testing.T) {
	m := Message{Type: MsgUpdate, From: "h1", PartID: "p-<a&b>", Version: 3, Reason: "é \u2028 <tag> & \"quoted\"", Part: &Partition{ID: "p-<a&b>", Initiator: "h1", Leader: "h1", State: Growing,
		Nodes: []string{"h1", "h2"}}, Solved: []string{"ev-1"}}
	got, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(wire{V: WireVersion, Msg: body})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode:\n%s\nwant\n%s", got, want)
	}
}
