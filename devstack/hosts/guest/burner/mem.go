package main

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

const (
	mib      = 1 << 20
	pageSize = 4096
	// dirtyTick is how often the dirtier catches up with its rate.
	dirtyTick = 10 * time.Millisecond
)

// memDirtier holds a buffer of mb MiB and writes to its pages at mbps MiB/s,
// round and round, so a live migration sees that many dirty pages a second.
type memDirtier struct {
	mu      sync.Mutex
	mb      int
	mbps    float64
	stop    chan struct{}
	wg      sync.WaitGroup
	dirtied atomic.Int64 // pages written since start
}

// Set holds mb MiB and dirties them at mbps MiB/s (mb 0 frees the buffer;
// mbps 0 only holds it). The buffer is touched once in full when it is
// allocated, so it is resident before the rate starts.
func (m *memDirtier) Set(mb int, mbps float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		close(m.stop)
		m.wg.Wait()
		m.stop = nil
	}
	m.mb, m.mbps = mb, mbps
	if mb <= 0 {
		debug.FreeOSMemory()
		return
	}
	m.stop = make(chan struct{})
	m.wg.Add(1)
	go func(stop <-chan struct{}) {
		defer m.wg.Done()
		buf := make([]byte, mb*mib)
		m.touch(buf, 0, len(buf)/pageSize)
		if mbps > 0 {
			m.dirty(buf, mbps, stop, time.NewTicker(dirtyTick))
		} else {
			<-stop
		}
		buf = nil
		debug.FreeOSMemory()
	}(m.stop)
}

// Status is the size, the rate and the MiB dirtied so far.
func (m *memDirtier) Status() (mb int, mbps, dirtiedMB float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mb, m.mbps, float64(m.dirtied.Load()*pageSize) / mib
}

// touch writes one byte in each of n pages starting at page first (wrapping).
func (m *memDirtier) touch(buf []byte, first, n int) int {
	pages := len(buf) / pageSize
	p := first
	for i := 0; i < n; i++ {
		buf[p*pageSize]++
		if p++; p == pages {
			p = 0
		}
	}
	m.dirtied.Add(int64(n))
	return p
}

// dirty keeps the written pages at mbps MiB/s of elapsed time until stop.
func (m *memDirtier) dirty(buf []byte, mbps float64, stop <-chan struct{}, tick *time.Ticker) {
	defer tick.Stop()
	start, done, next := time.Now(), 0.0, 0
	perSecond := mbps * mib / pageSize
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			owed := perSecond*now.Sub(start).Seconds() - done
			if owed < 1 {
				continue
			}
			n := int(owed)
			next = m.touch(buf, next, n)
			done += float64(n)
		}
	}
}
