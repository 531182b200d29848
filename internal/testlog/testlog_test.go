package testlog

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once (go test -race finds a missing lock), and
// nothing written is lost.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	const writers, lines = 4, 200
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range lines {
				if _, err := b.Write([]byte("x\n")); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range lines {
			_ = b.String()
		}
	}()
	wg.Wait()
	<-done
	if n := strings.Count(b.String(), "x\n"); n != writers*lines {
		t.Fatalf("%d lines kept, want %d", n, writers*lines)
	}
}
