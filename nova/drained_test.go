package nova_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
)

// listing answers Servers from a script, one step per call; the last
// step repeats.
type listing struct {
	nova.Client
	steps [][]nova.Server
	calls int
}

func (l *listing) Servers(context.Context, string) ([]nova.Server, error) {
	i := min(l.calls, len(l.steps)-1)
	l.calls++
	if l.steps[i] == nil {
		return nil, nova.ErrUnavailable
	}
	return l.steps[i], nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func TestWaitDrained(t *testing.T) {
	a := nova.Server{ID: "a", Name: "web-1", Status: nova.StatusActive}
	aMoving := nova.Server{ID: "a", Name: "web-1", Status: nova.StatusMigrating, TaskState: "migrating"}
	b := nova.Server{ID: "b", Name: "db-1", Status: nova.StatusActive}
	n := nova.Server{ID: "n", Name: "gpu-1", Status: nova.StatusActive, Metadata: map[string]string{nova.MetaMaintenanceAction: "notify"}}
	for _, tc := range []struct {
		name     string
		steps    [][]nova.Server
		wantLeft int
		wantOut  []string
	}{
		{"empties", [][]nova.Server{{a, b}, {aMoving, b}, {b}, {}}, 0,
			[]string{"2 server(s) left, 0 moving", "2 server(s) left, 1 moving", "1 server(s) left", "compute-1: empty after"}},
		{"already empty", [][]nova.Server{{}}, 0, []string{"0 server(s) left", "empty"}},
		{"stalls", [][]nova.Server{{a, b}, {b}}, 1,
			[]string{"nothing changed for 1m0s; 1 server(s) remain", "b  db-1"}},
		{"listing errors are retried", [][]nova.Server{{a}, nil, nil, {}}, 0, []string{"empty"}},
		{"left for their owners at once", [][]nova.Server{{a, n}, {aMoving, n}, {n}}, 1,
			[]string{"2 server(s) left, 1 moving", "not drained: 1 server(s) left for their owners (dvms:maintenance_action=notify)", "n  gpu-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)}
			tick := make(chan time.Time)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { // every tick is 10 s later
				for {
					now := clk.advance(10 * time.Second)
					select {
					case tick <- now:
					case <-ctx.Done():
						return
					}
				}
			}()
			var out bytes.Buffer
			left, err := nova.WaitDrained(ctx, &listing{steps: tc.steps}, "compute-1", time.Minute, tick, clk.now, &out, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != tc.wantLeft {
				t.Errorf("left %v, want %d", left, tc.wantLeft)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestWaitDrainedStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := nova.WaitDrained(ctx, &listing{steps: [][]nova.Server{{{ID: "a"}}}}, "h", time.Hour, make(chan time.Time), time.Now, &bytes.Buffer{}, zerolog.Nop())
	if err != context.Canceled {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
