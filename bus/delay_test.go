package bus

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestSubjectHost(t *testing.T) {
	for subj, want := range map[string]string{
		AgentSubject("r", "compute-1"): "compute-1", PingSubject("r", "h.x"): "h.x", HeartbeatSubject("r"): "", "other.r.agent.h": "",
	} {
		if got := SubjectHost(subj); got != want {
			t.Errorf("SubjectHost(%q) = %q, want %q", subj, got, want)
		}
	}
}

// recorder is a Transport that notes when each message was published.
type recorder struct {
	Transport
	mu   sync.Mutex
	at   map[string]time.Time
	done chan struct{}
}

func (r *recorder) Publish(_ context.Context, subject string, _ []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[subject] = time.Now()
	if len(r.at) == 2 {
		close(r.done)
	}
	return nil
}

// Delayed holds a message for its subject's delay, passes the others at
// once, and refuses to publish after Close.
func TestDelayed(t *testing.T) {
	rec := &recorder{at: map[string]time.Time{}, done: make(chan struct{})}
	d := NewDelayed(rec, func(subject string) time.Duration {
		if subject == "slow" {
			return 30 * time.Millisecond
		}
		return 0
	})
	start := time.Now()
	for _, s := range []string{"slow", "fast"} {
		if err := d.Publish(context.Background(), s, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	<-rec.done
	if got := rec.at["slow"].Sub(start); got < 30*time.Millisecond {
		t.Fatalf("held %s, want >= 30ms", got)
	}
	if !rec.at["fast"].Before(rec.at["slow"]) {
		t.Fatal("the undelayed message waited for the delayed one")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(context.Background(), "slow", nil); err != ErrClosed {
		t.Fatalf("publish after close: %v, want ErrClosed", err)
	}
}
