package scheduler

import (
	"encoding/json"
	"testing"
)

// The classification: every class belongs to one outcome, and the
// reasons this version writes, read as an older agent's (no class),
// derive the class this version gives them; an unknown text is
// "unknown", never a guess under another outcome.
func TestEndClass(t *testing.T) {
	for _, tc := range []struct {
		o      Outcome
		reason string
		want   EndClass
	}{
		{Solved, "3 done, 0 skipped, 0 failed", EndExecuted},
		{Solved, "1 done, 0 skipped, 0 failed; force_completed 1", EndForceCompleted},
		{Solved, "nothing to do", EndNothingToDo},
		{Solved, "nothing left to do after 2 re-plan(s)", EndNothingToDo},
		{Solved, "1 done, 1 skipped, 0 failed; the event's host is no longer overloaded by its own measurement (after 1 re-plan(s))", EndRelieved},
		{Unsolvable, "no solution after 2 full tours and a last look", EndNoSolution},
		{Failed, "1 done, 0 skipped, 1 failed", EndActionFailed},
		{Failed, "0 done, 0 skipped, 1 failed; migration_aborted 1 (s1: abort by dvms)", EndMigrationAborted},
		{Aborted, "nothing to do on fresh snapshots after 1 re-plan(s), " + Vanished, EndVanished},
		{Aborted, "0 done, 1 skipped, 0 failed; skipped for advise", EndAdvise},
		{Aborted, "0 done, 1 skipped, 0 failed; skipped for paused", EndPaused},
		{Aborted, "0 done, 1 skipped, 0 failed; skipped for excluded", EndExcluded},
		{Aborted, "0 done, 1 skipped, 0 failed; skipped for event_unverified", EndUnverified},
		{Aborted, "0 done, 2 skipped, 0 failed (after 2 re-plan(s))", EndSkipped},
		{Aborted, "leader c3 is stopping", EndStopping},
		{Aborted, "the merged partition's plan solved other events: raised again", EndSolvedOthers},
		{Aborted, "partition timeout: no word from leader c7", EndTimeout},
		{Aborted, "request lost: no progress", EndRequestLost},
		{Aborted, "fork of p-c1-3 at version 5: the partition goes on at 6", EndFork},
		{Aborted, "absorbed into p-c2-1 (the absorption message was lost)", EndAbsorbedLost},
		{Aborted, "initiator c1 crashed", EndMemberLost},
		{Aborted, "leader c2 crashed", EndMemberLost},
		{Aborted, "initiator c1 no snapshot in time", EndMemberLost},
		{Aborted, "removed from the partition", EndMemberLost},
		{Aborted, "words of another version", EndUnknown},
		{Solved, "words of another version", EndUnknown},
		{0, "nothing to do", EndUnknown},
	} {
		got := DeriveEndClass(tc.o, tc.reason)
		if got != tc.want {
			t.Errorf("DeriveEndClass(%v, %q) = %q, want %q", tc.o, tc.reason, got, tc.want)
		}
		if got != EndUnknown && got.Outcome() != tc.o {
			t.Errorf("%q belongs to %v, derived under %v", got, got.Outcome(), tc.o)
		}
		if EndClass("").Of(tc.o, tc.reason) != got || EndClass("from_a_newer_agent").Of(tc.o, tc.reason) != got {
			t.Errorf("Of(%v, %q): a missing or unknown class is derived (%q)", tc.o, tc.reason, got)
		}
		if tc.o != 0 {
			for c, o := range endClasses {
				if want := map[bool]EndClass{true: c, false: got}[o == tc.o]; c.Of(tc.o, tc.reason) != want {
					t.Errorf("%q.Of(%v, %q) = %q, want %q (a class is kept under its own outcome only)", c, tc.o, tc.reason, c.Of(tc.o, tc.reason), want)
				}
			}
		}
	}
	if EndUnknown.Known() || EndUnknown.Outcome() != 0 {
		t.Errorf("unknown is no outcome's class")
	}
	for o := Solved; o <= Aborted; o++ {
		if ParseOutcome(o.String()) != o {
			t.Errorf("ParseOutcome(%q) = %v", o.String(), ParseOutcome(o.String()))
		}
	}
}

// A dissolution carries its class to the members; one from an older
// agent (no Class on the wire) gets the class derived from its reason.
func TestDissolveCarriesClass(t *testing.T) {
	m := Message{Type: MsgDissolve, From: "c1", PartID: "p", Version: 1, Outcome: Aborted, Reason: "partition timeout: no word from leader c7", Class: EndTimeout}
	data, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || got.Class != EndTimeout {
		t.Fatalf("decoded class %q (%v), want %q", got.Class, err, EndTimeout)
	}
	// An older agent's: the same message without the field.
	var w wire
	_ = json.Unmarshal(data, &w)
	var raw map[string]any
	_ = json.Unmarshal(w.Msg, &raw)
	delete(raw, "Class")
	w.Msg, _ = json.Marshal(raw)
	data, _ = json.Marshal(w)
	old, err := Decode(data)
	if err != nil || old.Class != "" || old.Class.Of(old.Outcome, old.Reason) != EndTimeout {
		t.Fatalf("older agent's dissolution: class %q (%v), derived %q", old.Class, err, old.Class.Of(old.Outcome, old.Reason))
	}
}
