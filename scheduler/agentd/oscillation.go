package agentd

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/oscillation"
)

// oscillationHooks feed d from the runner's hooks, observed only: this
// host's OVERLOAD events that ended solved, and the live migrations this
// agent executed (it led the plan) or adopted (it followed its host's
// move in Nova). Each detection is one warning and one count of c (nil:
// none).
func oscillationHooks(host string, d *oscillation.Detector, c *prometheus.CounterVec, log zerolog.Logger) node.Hooks {
	report := func(det oscillation.Detection) {
		if c != nil {
			c.WithLabelValues(string(det.Kind)).Inc()
		}
		ev := log.Warn().Str("kind", string(det.Kind)).Str("host", det.Host).Int("count", det.Count).Dur("window", det.Window)
		if det.Kind == oscillation.ServerMovedBack {
			ev = ev.Str("server", det.Server).Str("from", det.From).Str("to", det.To)
			ev.Msg("oscillation: server moved back where dvms took it from within the window")
			return
		}
		ev.Msg("oscillation: host relieved of overload again and again within the window")
	}
	moves := func(res node.ExecResult) {
		for _, a := range res.Actions {
			if a.Outcome != node.ActionDone || a.Action.Kind != scheduler.LiveMigrate {
				continue
			}
			if det, ok := d.Moved(a.Action.Server, a.Action.From, a.Action.To); ok {
				report(det)
			}
		}
	}
	return node.Hooks{
		OnRecord: func(_ string, r scheduler.Record) {
			if r.Kind != scheduler.RecEventEnded || r.Event.Kind != scheduler.Overload || r.Outcome != scheduler.Solved || r.Event.Host != host {
				return
			}
			if det, ok := d.Relieved(host); ok {
				report(det)
			}
		},
		OnExec:  func(_ string, _ scheduler.Event, res node.ExecResult) { moves(res) },
		OnAdopt: func(_ string, _ scheduler.Event, res node.ExecResult) { moves(res) },
	}
}
