package fake

import (
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Conservation and accounting cannot break through the public API of a
// correct fake, so these cases corrupt the state directly, as a bug in
// the migration state machine would, and expect the observer (per
// mutation) and Audit (full recount) to report it.
func TestObserverCatchesCorruptedState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(c *Cloud)
		want    string
	}{
		{"server dropped from its host", func(c *Cloud) {
			h := c.hosts["h1"]
			delete(h.servers, "s1") // no counter update: a lost server
			c.obs.placed--
		}, "servers not conserved"},
		{"server listed on two hosts", func(c *Cloud) {
			c.place(c.hosts["h2"], c.servers["s1"]) // the source forgot to drop it
		}, "servers not conserved"},
		{"allocation not freed", func(c *Cloud) {
			c.hosts["h1"].usedV += 3
		}, "placement accounting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(DefaultConfig(), NewManualClock(time.Unix(0, 0)))
			c.AddHost(nova.Host{Name: "h1", VCPUs: 4, RAMMB: 4096})
			c.AddHost(nova.Host{Name: "h2", VCPUs: 4, RAMMB: 4096})
			if err := c.AddServer(nova.Server{ID: "s1", Host: "h1", VCPUs: 2, RAMMB: 1024}); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			tc.corrupt(c)
			c.checkHosts(c.hosts["h1"], c.hosts["h2"])
			c.mu.Unlock()
			all := append(c.Violations(), c.Audit()...)
			var msgs []string
			for _, v := range all {
				msgs = append(msgs, v.String())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Fatalf("violations %q, want one saying %q", msgs, tc.want)
			}
		})
	}
}
