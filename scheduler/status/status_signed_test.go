package status

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/testbus"
)

// Status answers are signed by the answering host's key: with the
// region's keys, the command line takes c1's and c2's own answers and
// none of a forger who stole c3's key and answers for every host (its
// own report signed with c3's key but naming c1, and unsigned answers in
// c1's and c2's names); it still takes c3's honest report of itself.
// Without keys, the forger's answers are taken (the control).
func TestStatusAnswersSignedByTheirHost(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	hosts := []string{"c1", "c2", "c3"}
	keys := testbus.NewKeys(t, dir, hosts...)
	ring, wrap := keys.Ring, keys.Wrap
	members := []MemberInfo{{Host: "c1"}, {Host: "c2"}, {Host: "c3"}}
	for _, h := range []string{"c1", "c2"} {
		tr := testbus.Connect(t, ctx, url, h)
		s := &Service{Region: "g", Bus: tr, Signed: wrap(tr, h), Answer: func(Request) Report {
			return Report{V: 1, Host: h, State: "free", Members: slices.Clone(members)}
		}}
		go func() { _ = s.Run(ctx) }()
	}
	// The forger: c3's key, answering each request with a report in
	// every host's name (signed by c3, and unsigned), as "leader".
	ftr := testbus.Connect(t, ctx, url, "c3")
	fsigned := wrap(ftr, "c3")
	var forged sync.WaitGroup
	sub, err := ftr.Subscribe(bus.StatusSubject("g"), func(_ string, data []byte) {
		var r Request
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		forged.Go(func() {
			for _, h := range hosts {
				rep := Encode(Report{V: 1, Host: h, State: "leader", Members: slices.Clone(members)})
				if h == "c3" {
					rep = Encode(Report{V: 1, Host: h, State: "free", Members: slices.Clone(members)})
				}
				_ = fsigned.Publish(ctx, r.Reply, rep)
				if h != "c3" {
					_ = ftr.Publish(ctx, r.Reply, rep)
				}
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for _, c := range []*bus.NATS{ftr} {
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.Flush(fctx); err != nil {
			t.Fatal(err)
		}
		fcancel()
	}

	cli := testbus.Connect(t, ctx, url, "cli")
	gather := func(keys *auth.Keyring) (map[string]string, []string) {
		var mu sync.Mutex
		var drops []string
		var got map[string]string
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			reps, _ := Gather(ctx, cli, GatherConfig{Region: "g", Timeout: 500 * time.Millisecond, Keys: keys, OnDrop: func(h, why string) {
				mu.Lock()
				defer mu.Unlock()
				drops = append(drops, h+": "+why)
			}})
			got = map[string]string{}
			for _, r := range reps {
				got[r.Host] = r.State
			}
			if len(got) == 3 {
				break
			}
		}
		forged.Wait()
		mu.Lock()
		defer mu.Unlock()
		return got, drops
	}

	got, drops := gather(ring)
	if got["c1"] != "free" || got["c2"] != "free" || got["c3"] != "free" {
		t.Errorf("with keys: states %v, want every host's own report (free)", got)
	}
	var signedAsOther, unsigned int
	for _, d := range drops {
		switch {
		case strings.Contains(d, "signed by c3"):
			signedAsOther++
		case strings.Contains(d, "not signed"):
			unsigned++
		}
	}
	if signedAsOther == 0 || unsigned == 0 {
		t.Errorf("drops %q: want the forger's reports signed by c3 for other hosts and its unsigned ones named", drops)
	}
	// The control: unverified, the forger's report on c1 is taken.
	forgedC1 := fsignedSeal(t, dir, "c3", "_INBOX.x", Encode(Report{V: 1, Host: "c1", State: "leader"}))
	if r, why := openAnswer(nil, "_INBOX.x", forgedC1); why != "" || r.Host != "c1" || r.State != "leader" {
		t.Errorf("without keys: %+v, %q; want the forged report taken (the test no longer tests anything)", r, why)
	}
	if _, why := openAnswer(ring, "_INBOX.x", forgedC1); !strings.Contains(why, "report on c1 signed by c3") {
		t.Errorf("with keys: %q, want the forged report dropped", why)
	}
	honest := fsignedSeal(t, dir, "c1", "_INBOX.x", Encode(Report{V: 1, Host: "c1", State: "free"}))
	if _, why := openAnswer(ring, "_INBOX.y", honest); !strings.Contains(why, "signature of c1 does not hold") {
		t.Errorf("c1's answer to another request: %q, want it dropped", why)
	}
}

// fsignedSeal is payload sealed for subject with host's key in dir.
func fsignedSeal(t *testing.T, dir, host, subject string, payload []byte) []byte {
	t.Helper()
	s, err := auth.LoadSigner(dir, host)
	if err != nil {
		t.Fatal(err)
	}
	return s.Seal(subject, payload, time.Now())
}
