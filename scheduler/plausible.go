package scheduler

// A destination's word against its flavors (DESIGN §5.5, insiders): a
// host's agent reports its servers' demand, and an agent that
// under-reports makes its host look empty and attracts servers. What the
// host cannot forge is its servers' flavors (Nova gives them), and what it
// cannot hide is how its word compares with its peers': the other members
// of the partition report theirs. A host whose servers, by its word, use a
// far smaller share of their flavors' RAM than the partition's typical
// host's (PlausibleRAM of the upper quartile of the shares) is implausible and no
// destination: the planner marks it disabled for the plan and the
// executor's re-check skips a move into a host whose answer is
// implausible. RAM only: a guest's RAM does not drop on its own once
// touched, while its CPU may idle. What its servers may still leave it for
// is unchanged (it is a source like any other, with its own consent).

import "slices"

// PlausibleRAM: a host whose servers' reported RAM over their flavors'
// RAM is under this fraction of the upper quartile of its partition's
// hosts' is
// implausible.
const PlausibleRAM = 0.25

// wordMinHosts: the least hosts with servers that make a reference.
const wordMinHosts = 2

// RAMShare is what a host's word says its servers use of their flavors'
// RAM: the sum of their reported RAM over the sum of their flavor RAM
// (ok false for a host with no server of a known flavor: an empty host
// has nothing to under-report). ram says a server's reported RAM (ok
// false: not reported, left out); flavorMB its flavor's RAM.
func RAMShare(n int, ram func(i int) (float64, bool), flavorMB func(i int) int) (share float64, ok bool) {
	var used, flavor float64
	for i := range n {
		mb := flavorMB(i)
		r, has := ram(i)
		if mb <= 0 || !has {
			continue
		}
		used += r
		flavor += float64(mb)
	}
	if flavor <= 0 {
		return 0, false
	}
	return used / flavor, true
}

// HostRAMShare is RAMShare of a snapshot host.
func HostRAMShare(h *Host) (float64, bool) {
	return RAMShare(len(h.Servers), func(i int) (float64, bool) { return h.Servers[i].RAM, true },
		func(i int) int { return h.Servers[i].RAMMB })
}

// WordReference is the upper quartile of hosts' RAM shares (nearest
// rank; ok false with fewer than two hosts with servers: no peers to
// compare a word with). Not the median: adversaries that take partitions
// over bring their own hosts in, and where liars with servers are half a
// partition's hosts the median is a liar's share; the upper quartile is an
// honest host's while liars are fewer than three quarters of them.
func WordReference(hosts []Host) (ref float64, ok bool) {
	var shares []float64
	for i := range hosts {
		if s, ok := HostRAMShare(&hosts[i]); ok {
			shares = append(shares, s)
		}
	}
	if len(shares) < wordMinHosts {
		return 0, false
	}
	slices.Sort(shares)
	return shares[(3*len(shares)+3)/4-1], true
}

// Implausible says whether a host whose word gives share, in a partition
// whose reference is ref, under-reports implausibly.
func Implausible(share, ref float64) bool { return share < PlausibleRAM*ref }

// ImplausibleHosts names the hosts whose word is implausible against the
// others' (hosts' order; nil when there is no reference).
func ImplausibleHosts(hosts []Host) []string {
	ref, ok := WordReference(hosts)
	if !ok {
		return nil
	}
	var out []string
	for i := range hosts {
		if s, ok := HostRAMShare(&hosts[i]); ok && Implausible(s, ref) {
			out = append(out, hosts[i].Name)
		}
	}
	return out
}
