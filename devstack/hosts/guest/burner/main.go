package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// retryEvery paces looking for the port and reopening it after the host side
// closed (a closed virtio-serial port reads EOF at once, so the wait matters).
const retryEvery = 200 * time.Millisecond

func main() {
	name := flag.String("name", "org.qemu.guest_agent.0", "virtio-serial port `name` to serve")
	port := flag.String("port", "", "device `path` to serve instead of looking the name up in /sys/class/virtio-ports")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("dvms-burner: ")

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	g := &guest{uptime: procUptime}
	if err := run(ctx, g, *name, *port); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// run serves the port until ctx ends, reopening it whenever the host side
// goes away (libvirt reconnects on its own schedule).
func run(ctx context.Context, g *guest, name, port string) error {
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	announced := false
	for {
		path := port
		if path == "" {
			path = findPort("/sys/class/virtio-ports", name)
		}
		if path != "" {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err == nil {
				if !announced {
					log.Printf("ready on %s (%s), uptime %s", path, name, uptimeString(g))
					announced = true
				}
				err = serve(f, g)
				f.Close()
			}
			if err != nil && !errors.Is(err, io.EOF) {
				log.Printf("%s: %v", path, err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// findPort returns /dev/<port> for the virtio-serial port called name, or "".
func findPort(sysDir, name string) string {
	names, _ := filepath.Glob(filepath.Join(sysDir, "*", "name"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err == nil && strings.TrimSpace(string(b)) == name {
			return filepath.Join("/dev", filepath.Base(filepath.Dir(n)))
		}
	}
	return ""
}

func uptimeString(g *guest) string {
	up, err := g.uptime()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%.2fs", up)
}
