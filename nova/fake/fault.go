package fake

import (
	"context"
	"fmt"

	"github.com/dvms-project/dvms/nova"
)

// Call kinds, for fault injection: a read never answers 409.
const (
	callRead = iota
	callAction
)

// gate runs before every nova.Client call, without c.mu held. It fails
// a call whose ctx is already done, and with Config.FaultRate injects a
// fault before the call touches any state (so a failed action never
// happened; callers still have to treat the outcome as unknown):
// HTTP 500 (nova.ErrUnavailable), HTTP 409 on actions (nova.ErrConflict),
// or a timeout: it waits for ctx to be done and returns
// nova.ErrUnavailable wrapping ctx.Err(), or returns at once when ctx
// has no deadline (so nothing ever hangs). With the error comes the
// class of the answer (nova.ClassServerError, ClassConflict,
// ClassTransport).
func (c *Cloud) gate(ctx context.Context, kind int, op string) (string, error) {
	if err := ctx.Err(); err != nil {
		return nova.ClassTransport, fmt.Errorf("%s: %w: %w", op, nova.ErrUnavailable, err)
	}
	if c.cfg.FaultRate <= 0 {
		return nova.ClassOK, nil
	}
	c.mu.Lock()
	p := c.faultRand.Float64()
	n := 2 // 500 or timeout
	if kind == callAction {
		n = 3 // or 409
	}
	f := c.faultRand.Intn(n)
	if p >= c.cfg.FaultRate {
		c.mu.Unlock()
		return nova.ClassOK, nil
	}
	c.obs.stats.Faults++
	c.mu.Unlock()
	switch f {
	case 0:
		return nova.ClassServerError, fmt.Errorf("%s: injected HTTP 500: %w", op, nova.ErrUnavailable)
	case 2:
		return nova.ClassConflict, fmt.Errorf("%s: injected HTTP 409: %w", op, nova.ErrConflict)
	}
	if _, ok := ctx.Deadline(); !ok {
		return nova.ClassTransport, fmt.Errorf("%s: injected timeout: %w", op, nova.ErrUnavailable)
	}
	<-ctx.Done()
	return nova.ClassTransport, fmt.Errorf("%s: injected timeout: %w: %w", op, nova.ErrUnavailable, ctx.Err())
}

// migrationFault draws whether a live migration that passed scheduling
// fails (c.mu held).
func (c *Cloud) migrationFault() bool {
	if c.cfg.FaultRate <= 0 || c.faultRand.Float64() >= c.cfg.FaultRate {
		return false
	}
	c.obs.stats.Faults++
	return true
}
