// Package wire is what the bed's burner guest answers on its QEMU guest
// agent channel (devstack/hosts/guest/burner) and what its callers (ctl.sh,
// the RealHosts tests) read: one definition of the answer. It imports
// nothing of dvms.
package wire

// Status is the return value of every dvms-* command of the burner:
// {"execute":"dvms-status"} and the ones that change what it does.
type Status struct {
	Version   string  `json:"version"`    // burner version
	UptimeS   float64 `json:"uptime_s"`   // the guest's /proc/uptime
	Cores     float64 `json:"cores"`      // cores it was told to burn
	MemMB     int     `json:"mem_mb"`     // MiB it holds
	MemMBPS   float64 `json:"mem_mbps"`   // MiB/s it was told to dirty
	DirtiedMB float64 `json:"dirtied_mb"` // MiB written since it started holding memory
}
