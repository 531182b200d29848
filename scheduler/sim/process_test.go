package sim

import (
	"os"
	"testing"
)

func TestSwimMemLimit(t *testing.T) {
	for _, c := range []struct {
		total, want int64
	}{
		{0, 8 << 30},          // unknown: the old limit
		{-1, 8 << 30},         // unknown
		{8 << 30, 4 << 30},    // a small machine: half of it
		{23 << 30, 23 << 29},  // this one: half, under 12 GiB
		{64 << 30, 12 << 30},  // a large one: 12 GiB at most
		{24 << 30, 12 << 30},  // exactly twice the cap
		{25 << 30, 12 << 30},  // above it
		{1 << 30, 512 << 20},  // tiny: still half
		{3 << 30, 1536 << 20}, // not a power of two
	} {
		if got := swimMemLimit(c.total); got != c.want {
			t.Errorf("swimMemLimit(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

func TestVirtualMemLimit(t *testing.T) {
	for _, c := range []struct {
		total, want int64
	}{
		{0, 4 << 30},             // unknown
		{6 << 30, 2 << 30},       // a small machine: a third of it
		{24 << 30, 8 << 30},      // exactly three times the cap
		{64 << 30, 8 << 30},      // a large one: 8 GiB at most
		{23 << 30, 23 << 30 / 3}, // this one: a third, under 8 GiB
	} {
		if got := virtualMemLimit(c.total); got != c.want {
			t.Errorf("virtualMemLimit(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

func TestMemTotal(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo here")
	}
	// Any machine that runs the tests has more than 256 MiB and less
	// than 64 TiB.
	if got := memTotal(); got < 256<<20 || got > 64<<40 {
		t.Fatalf("memTotal() = %d bytes, not a machine's memory", got)
	}
}
