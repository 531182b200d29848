package node_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/dvms-project/dvms/bus/auth/authtest"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/scheduler/node"
)

// ghostMeta is a SWIM delegate that announces fixed metadata.
type ghostMeta struct{ meta []byte }

func (g ghostMeta) NodeMeta(int) []byte               { return g.meta }
func (ghostMeta) NotifyMsg([]byte)                    {}
func (ghostMeta) GetBroadcasts(int, int) [][]byte     { return nil }
func (ghostMeta) LocalState(bool) []byte              { return nil }
func (ghostMeta) MergeRemoteState(buf []byte, _ bool) {}

// Issue 27: anyone with the region's SWIM key joined under any name and
// any Raft address. With the agents' keys, two ghosts holding the SWIM
// key join memberlist but never become members: "nokey", whose name has
// no key in keys_dir, and "k3", a ring member's name announced with
// metadata signed by k2's (stolen) key and a Raft address of the
// attacker's. The real members still see each other (the control).
func TestSwimGhostWithTheRegionKeyIsIgnored(t *testing.T) {
	sn := newSwimNet(t, 0)
	key := []byte("0123456789abcdef0123456789abcdef")
	signers, ring := authtest.Signers(t, []string{"k0", "k1", "k2", "k3"}, "nokey")
	hosts := []string{"k0", "k1", "k2", "nokey", "k3"}
	cfgs := make([]node.SwimConfig, len(hosts))
	for i, h := range hosts {
		cfgs[i] = node.SwimConfig{Self: node.Heartbeat{Host: h, Incarnation: "1", Raft: "127.0.0.1:742" + fmt.Sprint(i)},
			Transport: sn.Transport(h), Tune: swimFast, Key: key, Signer: signers[h], Keyring: ring}
		if i > 0 {
			cfgs[i].Seeds = []string{sn.Addr(cfgs[0].Transport)}
		}
	}
	// k3's ghost: its heartbeat, signed with k2's key in k3's name.
	hb, _ := json.Marshal(node.Heartbeat{V: 1, Host: "k3", Incarnation: "1", Raft: "203.0.113.7:7420"})
	meta := binary.BigEndian.AppendUint64([]byte("dvS1"), uint64(time.Now().UnixNano()))
	meta = append(meta, hb...)
	meta = append(meta, signers["k2"].SignDetached(node.SwimMetaSubject, meta)...)
	cfgs[4].Tune = func(c *memberlist.Config) { swimFast(c); c.Delegate = ghostMeta{meta} }
	sw := startSwims(t, cfgs)
	names := func(s *node.Swim) []string {
		var out []string
		for _, m := range s.Members() {
			out = append(out, m.Host)
		}
		return out
	}
	testwait.Until(t, 30*time.Second, "the members see each other and turn both ghosts down", func() (bool, string) {
		ok := true
		var state []string
		for _, s := range sw[:3] {
			ok = ok && slices.Equal(names(s), []string{"k0", "k1", "k2"}) && s.RejectedMeta() >= 2
			state = append(state, fmt.Sprintf("%v rejected %d", names(s), s.RejectedMeta()))
		}
		return ok, fmt.Sprint(state)
	})
	for _, s := range sw[:3] {
		for _, m := range s.Members() {
			if m.Host == "nokey" || m.Host == "k3" || m.Raft == "203.0.113.7:7420" {
				t.Errorf("a ghost is a member: %+v", m)
			}
		}
	}
}
