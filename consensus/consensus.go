package consensus

import (
	"context"
	"errors"
	"time"
)

// ErrUnknownOutcome means the request may or may not have been committed
// (e.g. the Raft leader was lost while applying it). The caller must
// re-read the partition records with Get before retrying: a merge that did
// commit must not be proposed again with the old versions (it would be
// refused as stale anyway, but the caller would miss that it succeeded).
var ErrUnknownOutcome = errors.New("consensus: outcome unknown")

// ErrNoQuorum means no decision can be taken now (no leader / no
// majority). Nothing was committed; retry later.
var ErrNoQuorum = errors.New("consensus: no quorum")

// Ref names one version of a partition.
type Ref struct {
	ID      string
	Version uint64
}

// Registration is a Blocked partition as its leader registers it.
type Registration struct {
	ID        string
	Version   uint64
	Initiator string
	Leader    string
	Nodes     []string
	// Lease is how long the registration stays alive without being
	// refreshed; expiry is computed from the time carried in committed
	// entries, never from a replica's own clock.
	Lease time.Duration
}

// Record is what the arbiter holds about a partition.
type Record struct {
	Registration
	Expires  time.Time // lease end, in entry time
	Absorbed bool
	Into     string // id of the absorbing partition when Absorbed
}

// Decision is the outcome of a committed request.
type Decision struct {
	Committed bool
	// Reason says why a request was refused (Committed false).
	Reason string
	// Version is the absorbing partition's version after a committed
	// merge; Nodes its node set.
	Version uint64
	Nodes   []string
}

// Arbiter decides merges. Implementations are linearizable: every request
// is applied in one total order. All methods are safe for concurrent use
// and return ErrUnknownOutcome or ErrNoQuorum (wrapped) when they cannot
// say what happened.
type Arbiter interface {
	// Register records or refreshes a Blocked partition. Refused when a
	// newer version is registered or the partition was already absorbed.
	Register(ctx context.Context, r Registration) (Decision, error)
	// Merge asks that partition p be absorbed into partition q. It commits
	// only if both are registered and alive at exactly those versions and
	// p's initiator orders after q's (p.Initiator > q.Initiator); it then
	// marks p absorbed (at most once) and bumps q's version.
	Merge(ctx context.Context, p, q Ref) (Decision, error)
	// Dissolve forgets a partition at version or older (it solved its
	// event, gave up, or lost a member).
	Dissolve(ctx context.Context, r Ref) (Decision, error)
	// Get returns the record of a partition, if the arbiter holds one.
	Get(ctx context.Context, id string) (Record, bool, error)
}
