package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// A drain's maintenance actions. A drain (a Maintenance event) plans a
// live migration of each server; the executor turns it into the first
// of the server's maintenance actions that works: its flavor's
// nova.MetaMaintenanceAction (its metadata's, when the client trusts
// it), else ExecConfig.MaintenanceActions, else live_migrate. A live
// migration Nova refuses (400 at the API, or a migration that ends in
// error with the server still ACTIVE on its source: the conductor's or
// the compute's pre-check said no) falls back to the next action; so
// does a cold migration the client cannot send. Each fallback is
// re-checked (and, fenced, granted) afresh, like any action. Relief
// and consolidation (overload, underload) only ever live-migrate.

// moves: the action lands the server on a.To (its destination is
// re-checked and reserved).
func moves(k scheduler.ActionKind) bool {
	return k == scheduler.LiveMigrate || k == scheduler.ColdMigrate
}

// kindOf maps a maintenance action to the executor's action kind.
func kindOf(m nova.MaintenanceAction) scheduler.ActionKind {
	switch m {
	case nova.MaintColdMigrate:
		return scheduler.ColdMigrate
	case nova.MaintShelveOffload:
		return scheduler.Shelve
	case nova.MaintNotify:
		return scheduler.Notify
	}
	return scheduler.LiveMigrate
}

// maintenanceActions is the chain for server s and where it came from.
// A value that does not parse is logged and the configured default
// used: a typo in a flavor must not stop a drain.
func (e *Executor) maintenanceActions(s nova.Server, log zerolog.Logger) ([]nova.MaintenanceAction, string) {
	if v, ok := s.Metadata[nova.MetaMaintenanceAction]; ok {
		as, err := nova.ParseMaintenanceActions(v)
		if err == nil {
			return as, nova.MetaMaintenanceAction + "=" + v
		}
		log.Warn().Err(err).Msg("drain: server's maintenance action does not parse; using the configured default")
	}
	if e.cfg.MaintenanceActions != "" {
		if as, err := nova.ParseMaintenanceActions(e.cfg.MaintenanceActions); err == nil {
			return as, "maintenance_actions=" + e.cfg.MaintenanceActions
		}
	}
	return []nova.MaintenanceAction{nova.MaintLiveMigrate}, "default live_migrate"
}

// drainServer runs a drain's action on one server: the server's
// maintenance actions in turn, until one did not fail for a reason a
// later one can avoid (cannotLive). The result records the action used
// (Action.Kind) and why (Class, Reason).
func (e *Executor) drainServer(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight, accepted func()) ActionResult {
	log := e.log.With().Str("event", ev.ID).Str("server", a.Server).Str("from", a.From).Logger()
	var once sync.Once
	acceptedOnce := func() { once.Do(accepted) }
	var chain []nova.MaintenanceAction
	var source string
	var tried []string
	var failed ActionResult // the last action that failed and fell back
	for i := 0; ; i++ {
		chose := false
		res := e.runOne(ctx, ev, a, f, acceptedOnce, func(s nova.Server) scheduler.ActionKind {
			if chain == nil {
				chain, source = e.maintenanceActions(s, log)
			}
			chose = true
			return kindOf(chain[min(i, len(chain)-1)])
		})
		switch {
		case !chose && i == 0:
			return res // skipped before the choice
		case !chose:
			// The fallback's re-check skipped it (the server is not ACTIVE
			// on its source, the destination no longer fits): the failure
			// stands, with why nothing more ran.
			failed.Reason += fmt.Sprintf("; next action %s not run: %s [%s]", chain[i], res.Reason, res.Class)
			return annotate(failed, source, tried[:len(tried)-1])
		}
		why := cannotRun(res)
		if why == "" || i+1 >= len(chain) {
			if len(chain) == 1 && chain[0] == nova.MaintLiveMigrate {
				return res // a plain live migration, recorded as ever
			}
			return annotate(res, source, tried)
		}
		tried = append(tried, fmt.Sprintf("%s: %s", res.Action.Kind, why))
		failed = res
		log.Warn().Str("tried", res.Action.Kind.String()).Str("reason", why).Str("next", string(chain[i+1])).
			Msg("drain: action not possible, falling back to the server's next maintenance action")
	}
}

// cannotRun says why res's action cannot be done and a later action may
// ("" when it was done, skipped, or failed in a way that needs a look:
// a timeout, an unknown outcome, a migration dvms aborted): a live or
// cold migration Nova refused at its API (400), that ended in error, or
// that this client cannot send. The next action's re-check re-reads the
// server: it runs only when the server is ACTIVE on its source again.
func cannotRun(res ActionResult) string {
	switch {
	case res.Outcome != ActionFailed || res.Class != ReasonFailed:
		return ""
	case moves(res.Action.Kind):
		return res.Reason
	}
	return ""
}

// errCannotCold: the Nova client has no cold migration.
var errCannotCold = errors.New("this nova client cannot cold-migrate")

// annotate records on res which maintenance action was used and why.
func annotate(res ActionResult, source string, tried []string) ActionResult {
	note := fmt.Sprintf("maintenance action %s (%s)", res.Action.Kind, source)
	if len(tried) > 0 {
		note += "; after " + strings.Join(tried, "; ")
	}
	switch {
	case res.Outcome == ActionDone && res.Class == ReasonNone && len(tried) > 0:
		res.Class = ReasonFallback
	case res.Outcome == ActionDone && res.Class == ReasonNone && res.Action.Kind != scheduler.LiveMigrate:
		res.Class = ReasonMaintenanceAction
	}
	if res.Reason == "" {
		res.Reason = note
	} else {
		res.Reason += "; " + note
	}
	return res
}

// coldMigrate sends a cold migration to a.To (one request).
func (e *Executor) coldMigrate(ctx context.Context, a scheduler.Action) (nova.Receipt, error) {
	cm, ok := e.nova.(nova.ColdMigrator)
	if !ok {
		return nova.Receipt{}, fmt.Errorf("cold-migrate %s: %w", a.Server, errCannotCold)
	}
	return cm.Migrate(ctx, a.Server, a.To)
}

// pollCold reads a followed cold migration once (one request; one more
// to confirm it, one more to say how a failed one ended). The server
// goes RESIZE, then VERIFY_RESIZE on the destination: dvms confirms it
// (confirmed notes the confirmation was accepted; a refused one is sent
// again at the next poll) and it is done once ACTIVE there. ACTIVE on
// its source again: the migration failed or was reverted, nothing lost.
func (e *Executor) pollCold(ctx context.Context, a scheduler.Action, baseline map[string]bool, confirmed *bool, log zerolog.Logger) (done, ok bool, err error) {
	s, err := e.nova.Server(ctx, a.Server)
	if err != nil {
		return false, false, nil
	}
	switch {
	case s.Status == nova.StatusVerifyResize && s.TaskState == "" && !*confirmed:
		if err := confirmResize(ctx, e.nova, a.Server); err != nil {
			log.Warn().Err(err).Msg("confirm resize refused; trying again at the next poll")
			return false, true, nil
		}
		*confirmed = true
		log.Info().Str("host", s.Host).Msg("cold migration finished; resize confirmed")
	case s.Status == nova.StatusActive && s.TaskState == "" && s.Host == a.To:
		return true, true, nil
	case s.Status == nova.StatusActive && s.TaskState == "" && s.Host == a.From:
		status := "unknown"
		if ms, err := e.nova.Migrations(ctx, a.Server); err == nil {
			for _, m := range ms {
				if !baseline[m.ID] {
					status = fmt.Sprintf("%s %s", m.ID, m.Status)
					break
				}
			}
		}
		return true, true, fmt.Errorf("cold-migrate %s to %s: migration %s; server ACTIVE on its source %s", a.Server, a.To, status, a.From)
	case s.Status == nova.StatusError:
		return true, true, fmt.Errorf("cold-migrate %s: server in ERROR on %q", a.Server, s.Host)
	case s.Status == nova.StatusActive && s.TaskState == "":
		return true, true, fmt.Errorf("cold-migrate %s to %s: server ACTIVE on %s instead", a.Server, a.To, s.Host)
	}
	return false, true, nil
}

// confirmResize confirms a server in VERIFY_RESIZE (one request).
func confirmResize(ctx context.Context, c nova.Client, serverID string) error {
	cm, ok := c.(nova.ColdMigrator)
	if !ok {
		return fmt.Errorf("confirm resize of %s: %w", serverID, errCannotCold)
	}
	_, err := cm.ConfirmResize(ctx, serverID)
	return err
}
