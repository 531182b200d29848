package scheduler

// The next node (DESIGN §5.3): the order in which a partition's request
// visits the region. Ring: the ring successor. Vivaldi: the nodes closest
// to the partition's initiator first, by the RTT the runtime estimates
// from Vivaldi coordinates (Config.Distance), ring order among nodes at
// the same distance and for nodes whose distance is unknown. Either way
// the order is a fixed permutation of the ring for a given initiator, so
// a request still tours the whole region and comes back home (tours,
// Blocked and merges work as with the ring).

import (
	"math"
	"slices"
	"time"
)

// Next-node policies (Config.NextNode).
const (
	NextRing    = "ring"
	NextVivaldi = "vivaldi"
)

// DistanceFunc estimates the round-trip time from host a to host b; ok
// is false when it is not known yet (coordinates not converged). It must
// be cheap: the agent calls it once per member when it orders the region.
type DistanceFunc func(a, b string) (rtt time.Duration, ok bool)

// distanceBand turns an RTT into a band: below 2 ms one band, then one
// band per doubling. Nodes in one band are ordered by the ring, so
// estimates that wobble a little do not reorder a site's nodes between
// two hops of the same request.
func distanceBand(d time.Duration) int {
	if d < 2*time.Millisecond {
		return 0
	}
	return int(math.Log2(float64(d) / float64(time.Millisecond)))
}

// unknownBand sorts nodes of unknown distance after every known one.
const unknownBand = math.MaxInt32

// orderTTL is how long an ordering is reused: estimates move, and
// reordering during a request's tour could make it skip a node.
const orderTTL = 10 * time.Second

// maxOrders bounds the orderings cached (one per initiator).
const maxOrders = 8

// order is the sequence a request visits, for one initiator.
type order struct {
	nodes []string
	// keys[i] is nodes[i]'s key; nil for the plain ring.
	keys []orderKey
	key  func(string) orderKey
	at   time.Time
}

type orderKey struct{ band, ring int }

func (k orderKey) cmp(o orderKey) int {
	if k.band != o.band {
		return k.band - o.band
	}
	return k.ring - o.ring
}

// index is n's position, or where it would be inserted.
func (o *order) index(n string) int {
	if o.keys == nil {
		i, _ := slices.BinarySearch(o.nodes, n)
		return i
	}
	k := o.key(n)
	i, _ := slices.BinarySearchFunc(o.keys, k, orderKey.cmp)
	return i
}

// orderFor returns the visiting order of requests started by initiator.
func (a *Agent) orderFor(initiator string) *order {
	if a.cfg.NextNode != NextVivaldi || a.cfg.Distance == nil {
		return &order{nodes: a.ring}
	}
	if o, ok := a.orders[initiator]; ok && a.now.Sub(o.at) < orderTTL {
		return o
	}
	if len(a.orders) >= maxOrders {
		clear(a.orders)
	}
	key := func(n string) orderKey {
		k := orderKey{band: unknownBand, ring: a.ringDist(initiator, n)}
		if n == initiator {
			k.band = -1
		} else if d, ok := a.cfg.Distance(initiator, n); ok {
			k.band = distanceBand(d)
		}
		return k
	}
	type keyed struct {
		n string
		k orderKey
	}
	ks := make([]keyed, len(a.ring))
	for i, n := range a.ring {
		ks[i] = keyed{n, key(n)}
	}
	slices.SortFunc(ks, func(x, y keyed) int { return x.k.cmp(y.k) })
	o := &order{nodes: make([]string, len(ks)), keys: make([]orderKey, len(ks)), key: key, at: a.now}
	for i, x := range ks {
		o.nodes[i], o.keys[i] = x.n, x.k
	}
	a.orders[initiator] = o
	return o
}

// nextOutside is the node after from, in the order of initiator's
// requests, that is not in p nor in avoid (the request's
// Partition.Avoid).
func (a *Agent) nextOutside(initiator, from string, p *Partition, avoid []string) (string, bool) {
	o := a.orderFor(initiator)
	n := len(o.nodes)
	i := o.index(from)
	for k := 1; k <= n; k++ {
		c := o.nodes[(i+k)%n]
		if c != from && !p.has(c) && !slices.Contains(avoid, c) {
			return c, true
		}
	}
	return "", false
}

// orderDist is how many positions to lies after from in the order of
// initiator's requests (0 when equal). Nodes missing from the ring count
// from where they would be inserted.
func (a *Agent) orderDist(initiator, from, to string) int {
	o := a.orderFor(initiator)
	n := len(o.nodes)
	i, j := o.index(from), o.index(to)
	return ((j-i)%n + n) % n
}

// ringDist is how many ring positions to lies after from (0 when equal).
// Nodes missing from the ring count from where they would be inserted.
func (a *Agent) ringDist(from, to string) int {
	n := len(a.ring)
	i, _ := slices.BinarySearch(a.ring, from)
	j, _ := slices.BinarySearch(a.ring, to)
	return ((j-i)%n + n) % n
}

// ringChanged drops the cached orderings.
func (a *Agent) ringChanged() { clear(a.orders) }
