package main

import (
	"math"
	"sync"
	"time"
)

// dutyPeriod is the CPU burner's cycle: a worker with share s spins for
// s*dutyPeriod and waits for the rest. 100 ms is far below the 1 s or more
// at which the host's cgroup counters are read.
const dutyPeriod = 100 * time.Millisecond

// cpuBurner keeps a set of spinning workers; Set replaces them.
type cpuBurner struct {
	mu    sync.Mutex
	cores float64
	stop  chan struct{}
	wg    sync.WaitGroup
}

// Set burns cores cores from now on (0 stops). Worker i burns
// min(1, cores-i) of one core, so 1.5 is one full worker and one at 50 %.
func (c *cpuBurner) Set(cores float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		close(c.stop)
		c.wg.Wait()
		c.stop = nil
	}
	c.cores = cores
	if cores <= 0 {
		return
	}
	c.stop = make(chan struct{})
	for i := 0; i < int(math.Ceil(cores)); i++ {
		c.wg.Add(1)
		go func(share float64) {
			defer c.wg.Done()
			spin(share, c.stop)
		}(math.Min(1, cores-float64(i)))
	}
}

// Cores is what Set was last given.
func (c *cpuBurner) Cores() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cores
}

// spin burns share of one core in dutyPeriod cycles until stop is closed.
func spin(share float64, stop <-chan struct{}) {
	busy := time.Duration(share * float64(dutyPeriod))
	idle := time.NewTimer(0)
	defer idle.Stop()
	<-idle.C
	for {
		start := time.Now()
		for n := 0; time.Since(start) < busy; n++ {
			if n&0xffff == 0 {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
		if rest := dutyPeriod - time.Since(start); rest > 0 {
			idle.Reset(rest)
			select {
			case <-stop:
				return
			case <-idle.C:
			}
		}
	}
}
