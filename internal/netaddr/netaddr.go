// Package netaddr reads listen addresses and derives the address other
// hosts dial (Raft's, SWIM's) from the route to NATS.
package netaddr

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/dvms-project/dvms/bus"
)

// ParseHostPort splits a "host:port" option value: the host may be empty
// (every interface) and the port must be 0..65535 (0: the listener picks
// one). The option table's check of host:port values (internal/conf), the Raft and the
// SWIM addresses all go through it.
func ParseHostPort(a string) (string, int, error) {
	host, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", a, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port: %w", a, err)
	}
	if port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: port %d out of 0..65535", a, port)
	}
	return host, port, nil
}

// Advertise is the address the other agents dial to reach a
// listener bound to bind (Raft's, SWIM's): advertise if set; "" if bind
// names an address (the listener advertises it) or is empty; for a
// wildcard bind, the local address this host reaches the (first) NATS
// server from, with bind's port. Port 0 is left to the listener (it
// advertises the port it got). The caller names the option in errors.
func Advertise(bind, advertise, natsURL string) (string, error) {
	if advertise != "" || bind == "" {
		return advertise, nil
	}
	h, port, err := ParseHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("bind: %w", err)
	}
	if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
		return "", nil
	}
	first := natsURL
	if i := strings.IndexByte(first, ','); i >= 0 {
		first = first[:i]
	}
	u, err := url.Parse(first)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("cannot derive it from bind %q and NATS url %q: set it", bind, bus.RedactURLs(natsURL))
	}
	nhost := u.Host
	if u.Port() == "" {
		nhost = net.JoinHostPort(u.Hostname(), "4222")
	}
	conn, err := net.Dial("udp", nhost) // no packet is sent: this only picks the route
	if err != nil {
		return "", fmt.Errorf("no route to NATS %s to derive it from (set it): %w", nhost, err)
	}
	defer conn.Close()
	ip := conn.LocalAddr().(*net.UDPAddr).IP
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
}
