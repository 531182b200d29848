package nova_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// scripted answers Migrations from a script, one step per call; the last
// step repeats.
type scripted struct {
	nova.Client
	mu    sync.Mutex
	steps []func() ([]nova.Migration, error)
	calls int
}

func (s *scripted) Migrations(context.Context, string) ([]nova.Migration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.steps)-1)
	s.calls++
	return s.steps[i]()
}

func mig(status string, created time.Time) func() ([]nova.Migration, error) {
	return func() ([]nova.Migration, error) {
		return []nova.Migration{{ID: "7", ServerID: "s1", Status: status, CreatedAt: created}}, nil
	}
}

func TestWaitMigration(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	old := func() ([]nova.Migration, error) {
		return []nova.Migration{{ID: "6", Status: nova.MigrationCompleted, CreatedAt: t0.Add(-time.Hour)}}, nil
	}
	unavailable := func() ([]nova.Migration, error) { return nil, nova.ErrUnavailable }
	for _, tc := range []struct {
		name    string
		steps   []func() ([]nova.Migration, error)
		want    string
		wantErr error
	}{
		{"completes", []func() ([]nova.Migration, error){mig("queued", t0), mig("running", t0), mig("completed", t0)}, "completed", nil},
		{"error is a result", []func() ([]nova.Migration, error){mig("preparing", t0), mig("error", t0)}, "error", nil},
		{"older migration ignored", []func() ([]nova.Migration, error){old, old, mig("completed", t0)}, "completed", nil},
		{"transient errors polled through", []func() ([]nova.Migration, error){unavailable, unavailable, mig("completed", t0)}, "completed", nil},
		{"not found ends", []func() ([]nova.Migration, error){func() ([]nova.Migration, error) { return nil, nova.ErrNotFound }}, "", nova.ErrNotFound},
		{"never ends", []func() ([]nova.Migration, error){mig("running", t0)}, "running", nova.ErrTimeout},
		{"never appears", []func() ([]nova.Migration, error){old}, "", nova.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			m, err := nova.WaitMigration(ctx, &scripted{steps: tc.steps}, "s1", t0, time.Millisecond)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if m.Status != tc.want {
				t.Errorf("migration %+v, want status %q", m, tc.want)
			}
			if errors.Is(err, nova.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("timeout error %v does not wrap ctx.Err()", err)
			}
		})
	}
}
