package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus/auth/authtest"
	"github.com/dvms-project/dvms/scheduler/journal"
)

// A journal update on the events subject, as UpdateReader judges it with
// the region's keys: c1's own, fresh, is taken once; signed by c3 in c1's
// name, unsigned, signed for another subject, or signed an hour ago (an
// old update passed on), it is dropped with the reason. Without keys the
// forged one is taken (the control).
func TestUpdateReaderTakesOnlyTheAgentsOwn(t *testing.T) {
	signers, ring := authtest.Signers(t, []string{"c1", "c3"})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const subject = "dvms.g.events"
	seal := func(signer, subj string, at time.Time) []byte {
		data, _ := json.Marshal(journal.Update{V: 1, Agent: "c1", At: at, Event: "ev", Kind: "overload", Host: "c1", Record: "event-raised"})
		return signers[signer].Seal(subj, data, at)
	}
	r := &UpdateReader{Keys: ring}
	own := seal("c1", subject, now)
	if u, why := r.Open(subject, own, now.Add(time.Second)); why != "" || u.Agent != "c1" {
		t.Fatalf("c1's own update: %+v, %q", u, why)
	}
	unsigned, _ := json.Marshal(journal.Update{V: 1, Agent: "c1", Event: "ev", Record: "event-raised"})
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"passed on again":       {own, "already shown"},
		"signed by c3 as c1":    {seal("c3", subject, now), "update of c1 signed by c3"},
		"unsigned":              {unsigned, "not signed"},
		"for another subject":   {seal("c1", "dvms.other.events", now), "does not hold"},
		"signed an hour before": {seal("c1", subject, now.Add(-time.Hour)), "not within"},
	} {
		if u, why := r.Open(subject, c.data, now.Add(time.Second)); !strings.Contains(why, c.want) {
			t.Errorf("%s: %+v, %q; want dropped: %s", name, u, why, c.want)
		}
	}
	if u, why := (&UpdateReader{}).Open(subject, seal("c3", subject, now), now); why != "" || u.Agent != "c1" {
		t.Errorf("without keys: %+v, %q; want the forged update taken (the test no longer tests anything)", u, why)
	}
}
