package scheduler

import (
	"fmt"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// Overloads only the server cooldown keeps (Config.ServerCooldown): when
// every event of a problem is an OVERLOAD whose host stays overloaded
// even with every server it may give up gone (neither fixed nor
// cooling), and some of its servers are cooling, no destination and no
// larger partition relieves it until a cooldown ends. The solver says so
// at once (Solution.Cooling) instead of searching, and the leader ends
// the event aborted, class cooling, without growing: a partition that
// grows for it tours the whole ring, and at a thousand hosts each step of
// the tour carries every member's snapshot. The event is raised again
// after the retry backoff if the host is still overloaded.

// coolingHolds reports whether every event of p is an overload that only
// cooling servers could relieve, and why (the first host's reason).
func coolingHolds(p *Problem) (string, bool) {
	if len(p.Events) == 0 {
		return "", false
	}
	why := ""
	for _, e := range p.Events {
		if e.Kind != Overload {
			return "", false
		}
		h := findHost(p.Hosts, e.Host)
		if h == nil {
			return "", false
		}
		use, lim := h.Use(), p.Thresholds.Limit(h)
		cooling := 0
		for k := range h.Servers {
			switch s := &h.Servers[k]; {
			case s.Fixed:
			case s.Cooling:
				cooling++
			default:
				use = use.Plus(s.Use().Neg())
			}
		}
		if cooling == 0 || !fit.Overloaded(use, lim) {
			return "", false
		}
		if why == "" {
			why = fmt.Sprintf("%s stays overloaded without %d server(s) moved within the server cooldown", h.Name, cooling)
		}
	}
	return why, true
}

func findHost(hs []Host, name string) *Host {
	for i := range hs {
		if hs[i].Name == name {
			return &hs[i]
		}
	}
	return nil
}
