package bus

import (
	"context"
	"sync"
	"time"
)

// Delayed is a Transport that holds every message it publishes for a
// delay that depends on the subject before handing it to the transport
// below (a simulated WAN: `dvms simulate --sites`). Subscriptions pass
// through. Close waits for the messages still held, then drops them.
type Delayed struct {
	Transport
	// Delay returns how long to hold a message on subject (wall time; 0:
	// at once).
	Delay func(subject string) time.Duration

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewDelayed wraps t.
func NewDelayed(t Transport, delay func(subject string) time.Duration) *Delayed {
	return &Delayed{Transport: t, Delay: delay}
}

// Publish holds data for Delay(subject), then publishes it below. An
// error of the delayed publication is lost, as a message on a wire.
func (d *Delayed) Publish(ctx context.Context, subject string, data []byte) error {
	wait := d.Delay(subject)
	if wait <= 0 {
		return d.Transport.Publish(ctx, subject, data)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	msg := append([]byte(nil), data...)
	d.wg.Add(1)
	time.AfterFunc(wait, func() {
		defer d.wg.Done()
		d.mu.Lock()
		closed := d.closed
		d.mu.Unlock()
		if !closed {
			_ = d.Transport.Publish(context.Background(), subject, msg)
		}
	})
	return nil
}

// Close stops publishing held messages and waits for their timers; it
// does not close the transport below (it may be shared).
func (d *Delayed) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}
