package node

import "time"

// Clock is the time source of a runtime. Real deployments use Wall;
// `dvms simulate` uses a Scaled clock so simulated time runs faster.
type Clock interface {
	Now() time.Time
	// After waits d of this clock's time.
	After(d time.Duration) <-chan time.Time
	// NewTicker ticks every d of this clock's time.
	NewTicker(d time.Duration) *time.Ticker
}

// Wall is the real clock.
type Wall struct{}

func (Wall) Now() time.Time                         { return time.Now() }
func (Wall) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (Wall) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// Scaled runs Factor times faster than the wall clock from Start, reading
// Epoch at Start.
type Scaled struct {
	Epoch  time.Time
	Start  time.Time
	Factor float64
}

// NewScaled returns a scaled clock starting now at epoch.
func NewScaled(epoch time.Time, factor float64) *Scaled {
	return &Scaled{Epoch: epoch, Start: time.Now(), Factor: factor}
}

func (s *Scaled) Now() time.Time {
	return s.Epoch.Add(time.Duration(float64(time.Since(s.Start)) * s.Factor))
}

// Wall converts a duration of this clock to wall time.
func (s *Scaled) Wall(d time.Duration) time.Duration {
	w := time.Duration(float64(d) / s.Factor)
	if w <= 0 {
		w = time.Microsecond
	}
	return w
}

func (s *Scaled) After(d time.Duration) <-chan time.Time { return time.After(s.Wall(d)) }
func (s *Scaled) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(s.Wall(d)) }
