package daemon

import "github.com/dvms-project/dvms/internal/netaddr"

// The agent's address helpers live in internal/netaddr.
var (
	parseHostPort = netaddr.ParseHostPort
	advertiseAddr = netaddr.Advertise
)
