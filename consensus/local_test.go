package consensus_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/consensus/arbitertest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestLocalArbiter(t *testing.T) {
	arbitertest.Run(t, func(t *testing.T) (consensus.Arbiter, arbitertest.Clock) {
		c := &clock{t: time.Unix(1_700_000_000, 0)}
		return consensus.NewLocal(c.Now), c
	})
}
