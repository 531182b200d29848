package nova

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// MetaMaintenanceAction is the operators' control of what a drain does
// with a server: an ordered, comma-separated list of maintenance
// actions (MaintenanceAction), tried in turn. Resolved like MetaPin: the
// flavor's extra spec wins, the server's metadata counts only when the
// client trusts it ([nova] server_metadata_controls).
const MetaMaintenanceAction = "dvms:maintenance_action"

// MaintenanceAction is what a drain does with one server.
type MaintenanceAction string

// The maintenance actions.
const (
	// MaintLiveMigrate: live-migrate it (the default).
	MaintLiveMigrate MaintenanceAction = "live_migrate"
	// MaintColdMigrate: migrate it with the guest stopped
	// (`openstack server migrate`, to the plan's destination), then
	// confirm the resize.
	MaintColdMigrate MaintenanceAction = "cold_migrate"
	// MaintShelveOffload: shelve and offload it (its disk goes to an
	// image; it is unshelved later elsewhere).
	MaintShelveOffload MaintenanceAction = "shelve_offload"
	// MaintNotify: leave it on the host for its owner; the drain records
	// it and ends without emptying the host.
	MaintNotify MaintenanceAction = "notify"
)

// ParseMaintenanceActions parses a MetaMaintenanceAction value: actions
// separated by commas (blanks ignored), each at most once, notify only
// last (nothing follows leaving a server). An empty value is an error.
func ParseMaintenanceActions(v string) ([]MaintenanceAction, error) {
	var out []MaintenanceAction
	seen := map[MaintenanceAction]bool{}
	for _, f := range strings.Split(v, ",") {
		a := MaintenanceAction(strings.TrimSpace(f))
		switch a {
		case MaintLiveMigrate, MaintColdMigrate, MaintShelveOffload, MaintNotify:
		case "":
			continue
		default:
			return nil, fmt.Errorf("maintenance action %q: want live_migrate, cold_migrate, shelve_offload or notify", a)
		}
		if seen[a] {
			return nil, fmt.Errorf("maintenance action %q listed twice in %q", a, v)
		}
		if seen[MaintNotify] {
			return nil, fmt.Errorf("maintenance actions %q: notify must be last", v)
		}
		seen[a] = true
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("maintenance actions %q: none given", v)
	}
	return out, nil
}

// Cold migration statuses (os-migrations, migration_type "migration"):
// a cold migration is "finished" when the server waits in VERIFY_RESIZE
// on its destination, "confirmed" or "reverted" when it ended.
const (
	MigrationFinished  = "finished"
	MigrationConfirmed = "confirmed"
	MigrationReverted  = "reverted"
)

// StatusVerifyResize: a cold migration (or resize) finished on the
// destination and waits to be confirmed or reverted; the source still
// holds the server's allocation.
const StatusVerifyResize = "VERIFY_RESIZE"

// ColdMigrator is what a client offers for cold migrations (nova/openstack
// and nova/fake do). Like every action, a nil error means Nova accepted
// the request (202).
type ColdMigrator interface {
	// Migrate asks Nova to cold-migrate a server to dest (microversion
	// 2.56 takes a host; "" lets the scheduler choose):
	// {"migrate": {"host": dest}}. The server goes RESIZE, then
	// VERIFY_RESIZE on dest.
	Migrate(ctx context.Context, serverID, dest string) (Receipt, error)
	// ConfirmResize confirms a server in VERIFY_RESIZE: it becomes
	// ACTIVE on its destination and the source's allocation is freed.
	ConfirmResize(ctx context.Context, serverID string) (Receipt, error)
	// RevertResize reverts a server in VERIFY_RESIZE to its source.
	RevertResize(ctx context.Context, serverID string) (Receipt, error)
}

// ServerAction is one instance action (`openstack server event list`).
type ServerAction struct {
	Action    string // live-migration, migrate, confirmResize, shelve, ...
	RequestID string // Nova's local request id
	Message   string // "" unless it failed
	Start     time.Time
}

// ActionLister lists a server's instance actions, newest first (GET
// /servers/{id}/os-instance-actions).
type ActionLister interface {
	ServerActions(ctx context.Context, serverID string) ([]ServerAction, error)
}
