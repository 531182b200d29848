// Command burner is the workload of the real-hypervisor test bed's guests
// (devstack/hosts/guest): a static program that runs as the guest's only
// service and, on request from the host, burns a given number of cores
// (fractions allowed), dirties a given amount of memory at a given rate, or
// idles, and reports the guest's uptime.
//
// Requests arrive on the QEMU guest agent channel (the virtio-serial port
// org.qemu.guest_agent.0 that Nova's libvirt driver adds for images with
// hw_qemu_guest_agent=yes) in the guest agent's wire format, so the host sends
// them with
//
//	virsh qemu-agent-command DOMAIN '{"execute":"dvms-cpu","arguments":{"cores":0.5}}'
//
// The protocol half (protocol.go) reads from any io.ReadWriter and is tested
// without a VM; the load half (cpu.go, mem.go) is driven by a clock and a stop
// channel and owns its goroutines.
package main
