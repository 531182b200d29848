package nova

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// WaitDrained lists the servers of host at every tick and prints
// progress to out, until the host is empty (nil, nil) or its servers,
// statuses and task states have not changed for stall (the servers that
// remain, nil), or every server left is one the drain leaves for its
// owner (maintenance action notify; those servers, nil): `dvms drain
// --wait`. Listing failures are logged and retried at the next tick
// (they count as no change). When ctx ends it returns the servers last
// seen and ctx's error.
func WaitDrained(ctx context.Context, cl Client, host string, stall time.Duration,
	tick <-chan time.Time, now func() time.Time, out io.Writer, log zerolog.Logger) ([]Server, error) {
	var last []Server
	lastPrint, start := "", now()
	changed := start
	first := true
	for {
		ss, err := cl.Servers(ctx, host)
		switch {
		case err != nil && ctx.Err() != nil:
			return last, ctx.Err()
		case err != nil:
			log.Warn().Err(err).Str("host", host).Msg("listing servers failed; retrying")
		default:
			slices.SortFunc(ss, func(a, b Server) int { return strings.Compare(a.ID, b.ID) })
			if p := fingerprint(ss); first || p != lastPrint {
				if !first {
					changed = now()
				}
				first, lastPrint = false, p
				moving := 0
				for _, s := range ss {
					if s.TaskState != "" || s.Status == StatusMigrating {
						moving++
					}
				}
				fmt.Fprintf(out, "%s  %s: %d server(s) left, %d moving\n",
					now().Format("15:04:05"), host, len(ss), moving)
				log.Debug().Str("host", host).Int("servers", len(ss)).Int("moving", moving).Msg("drain progress")
			}
			last = ss
			if len(ss) == 0 {
				fmt.Fprintf(out, "%s: empty after %s\n", host, now().Sub(start).Round(time.Second))
				return nil, nil
			}
			if LeftForOwners(ss) {
				fmt.Fprintf(out, "%s: not drained: %d server(s) left for their owners (%s=notify):\n", host, len(ss), MetaMaintenanceAction)
				printServers(out, ss)
				return ss, nil
			}
		}
		if now().Sub(changed) >= stall {
			fmt.Fprintf(out, "%s: nothing changed for %s; %d server(s) remain:\n", host, stall, len(last))
			printServers(out, last)
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-tick:
		}
	}
}

// LeftForOwners reports whether every server of ss is idle and its maintenance action
// (as the client resolved it) is notify: the drain leaves them for their
// owners, nothing more will move.
func LeftForOwners(ss []Server) bool {
	for _, s := range ss {
		as, err := ParseMaintenanceActions(s.Metadata[MetaMaintenanceAction])
		if err != nil || as[0] != MaintNotify || s.TaskState != "" || s.Status == StatusMigrating {
			return false
		}
	}
	return true
}

func printServers(out io.Writer, ss []Server) {
	for _, s := range ss {
		task := s.TaskState
		if task == "" {
			task = "-"
		}
		fmt.Fprintf(out, "  %s  %-24s %-18s %s\n", s.ID, s.Name, s.Status, task)
	}
}

func fingerprint(ss []Server) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s:%s:%s;", s.ID, s.Status, s.TaskState)
	}
	return b.String()
}
