package sim

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// simParallel is how many of this package's parallel tests run at once
// unless -test.parallel says otherwise: go test's default, GOMAXPROCS (2
// on the machines this project tests on), and one more for
// TestSimulateSwimMembership, which holds its place for 75 s of wall
// time and little CPU (memberlist runs on the wall clock). Five at once
// starved them all beside other work (every run went again slower).
// Each run still judges only what it achieved while it kept up with its
// clock (runKeptUp).
const simParallel = 3

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(simParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
