package consensus

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// SelectVoters picks n voters deterministically from peers (those with a
// RaftAddr), spread across sites round-robin (sites sorted, hosts sorted
// within a site: the first host of every site, then the second, ...);
// fewer if there are not enough. The order of peers does not matter; a
// host listed twice counts once (its smallest site and address).
func SelectVoters(peers []Peer, n int) []Peer {
	if n <= 0 {
		return nil
	}
	eligible := make([]Peer, 0, len(peers))
	for _, p := range peers {
		if p.RaftAddr != "" && p.ID != "" {
			eligible = append(eligible, p)
		}
	}
	slices.SortFunc(eligible, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Site, b.Site), cmp.Compare(a.RaftAddr, b.RaftAddr))
	})
	eligible = slices.CompactFunc(eligible, func(a, b Peer) bool { return a.ID == b.ID })
	bySite := map[string][]Peer{}
	var sites []string
	for _, p := range eligible {
		if _, ok := bySite[p.Site]; !ok {
			sites = append(sites, p.Site)
		}
		bySite[p.Site] = append(bySite[p.Site], p) // already sorted by id
	}
	slices.Sort(sites)
	out := make([]Peer, 0, min(n, len(eligible)))
	for round := 0; len(out) < n && len(out) < len(eligible); round++ {
		for _, site := range sites {
			if hosts := bySite[site]; round < len(hosts) && len(out) < n {
				out = append(out, hosts[round])
			}
		}
	}
	return out
}

// manage runs the voter management loop until ctx ends.
func (s *Service) manage(ctx context.Context) {
	t := time.NewTicker(s.cfg.ProbeInterval)
	defer t.Stop()
	for {
		s.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// fresh is how long a status message counts as current.
func (s *Service) fresh() time.Duration { return 4*s.cfg.ProbeInterval + 250*time.Millisecond }

// step is one round of voter management: start or stop this agent's raft
// node, probe, bootstrap, and, on the leader, one configuration change.
func (s *Service) step(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	self := s.cfg.ID
	peers := s.livePeers()
	selected := SelectVoters(peers, s.cfg.Voters)
	selfSel := slices.ContainsFunc(selected, func(p Peer) bool { return p.ID == self })
	first := len(selected) > 0 && selected[0].ID == self

	s.prune()
	n := s.currentNode()
	if n != nil && n.raft.r.State() == raft.Shutdown {
		s.stopNode("raft stopped itself")
		n = nil
	}
	if n == nil {
		s.candidateSince, s.removedSince = time.Time{}, time.Time{}
		if s.mux == nil || !selfSel || s.settling() {
			return
		}
		if err := s.startNode(); err != nil {
			s.log.Warn().Err(err).Msg("merge arbiter: cannot start raft node")
			return
		}
		n = s.currentNode()
	}

	f := n.raft.r.GetConfiguration()
	if err := f.Error(); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: raft configuration")
		return
	}
	conf := f.Configuration()
	voters, learners := members(conf, raft.Voter), members(conf, raft.Nonvoter)
	member, learner := slices.Contains(voters, self), slices.Contains(learners, self)
	if member && !n.wasMember {
		n.wasMember = true
		s.log.Info().Strs("voters", voters).Msg("merge arbiter: this agent is a voter")
	}
	if learner && !n.wasLearner {
		n.wasLearner = true
		s.log.Info().Strs("voters", voters).Msg("merge arbiter: this agent is catching up as a learner")
	}
	group := n.raft.fsm.groupID()
	switch {
	case (n.wasMember || n.wasLearner) && !member && !learner && len(conf.Servers) > 0:
		s.stopNode("removed from the group's configuration")
		return
	case !n.wasMember && len(conf.Servers) == 0 && !selfSel && time.Since(n.started) > s.cfg.BootstrapAfter:
		s.stopNode("not selected as a voter")
		return
	case (member || learner) && s.removedByLeader(n, group):
		s.stopNode("the leader's configuration no longer lists this agent")
		return
	case member && s.olderGroup(group) != "":
		s.log.Error().Str("group", group).Str("older_group", s.olderGroup(group)).
			Msg("merge arbiter: two groups in this region (bus was cut?); leaving the younger one to join the older")
		s.stopNode("another, older group serves this region")
		return
	}

	candidate := len(conf.Servers) == 0 && first
	st := wireState{ID: self, Addr: s.addr, Running: true, Member: member, Learner: learner, Voters: voters,
		Learners: learners, Group: group, Candidate: candidate}
	s.mu.Lock()
	s.self = st
	s.mu.Unlock()
	s.probe(ctx, st, n)

	if candidate {
		s.maybeBootstrap(n)
	} else {
		s.candidateSince = time.Time{}
	}
	if n.raft.Leader() {
		s.lead(ctx, n, conf, peers, selected)
	}
}

// settling holds the first raft node back for half of BootstrapAfter
// after Run starts: membership first hears the other agents' heartbeats,
// so in a region starting at once only the selected agents start a node
// (each agent alone in its first peer list would select itself).
func (s *Service) settling() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.runStart) < s.cfg.BootstrapAfter/2
}

// prune forgets the status of agents silent for long.
func (s *Service) prune() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ss := range s.seen {
		if time.Since(ss.at) > 10*s.fresh() {
			delete(s.seen, id)
		}
	}
}

// probe publishes this member's state; group members answer with
// theirs.
func (s *Service) probe(ctx context.Context, st wireState, n *serviceNode) {
	st = n.withLeader(st)
	data, err := json.Marshal(wireReq{V: wireVersion, ID: newToken(), From: s.cfg.ID, Reply: s.replySubj, Kind: kindStatus, State: &st})
	if err != nil {
		s.log.Error().Err(err).Msg("merge arbiter: encode probe")
		return
	}
	if err := s.bus.Publish(ctx, RequestSubject(s.cfg.Region), data); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: probe not sent")
	}
}

// removedByLeader reports whether the leader of this node's group has
// kept a configuration without this agent for a while: a removed
// follower often never receives its own removal (the leader stops
// replicating to it at once).
func (s *Service) removedByLeader(n *serviceNode, group string) bool {
	if group == "" || n.raft.Leader() {
		s.removedSince = time.Time{}
		return false
	}
	s.mu.Lock()
	var leader *seenState
	for _, ss := range s.seen {
		if ss.st.IsLeader && ss.st.Member && ss.st.Group == group && time.Since(ss.at) < s.fresh() &&
			(leader == nil || ss.at.After(leader.at)) {
			leader = &ss
		}
	}
	s.mu.Unlock()
	if leader == nil || slices.Contains(leader.st.Voters, s.cfg.ID) || slices.Contains(leader.st.Learners, s.cfg.ID) {
		s.removedSince = time.Time{}
		return false
	}
	if s.removedSince.IsZero() {
		s.removedSince = time.Now()
	}
	return time.Since(s.removedSince) > 3*s.cfg.ProbeInterval
}

// olderGroup is the id of another group of this region, older than
// group, whose members still answer; "" if none.
func (s *Service) olderGroup(group string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	older := ""
	for _, ss := range s.seen {
		g := ss.st.Group
		if ss.st.Member && g != "" && g < group && time.Since(ss.at) < s.fresh() && (older == "" || g < older) {
			older = g
		}
	}
	return older
}

// maybeBootstrap starts a new group with this node as its only voter
// once all of these hold: its node has never held a configuration and
// this agent has been first of SelectVoters (a candidate) for
// BootstrapAfter; no group member answered or probed for BootstrapAfter,
// nor since Run; no candidate with a smaller id announced itself in that
// time. So an agent restarted with an empty store never starts a second
// group while a member of the existing one reaches it over the bus: it
// waits to be added back.
func (s *Service) maybeBootstrap(n *serviceNode) {
	now := time.Now()
	if s.candidateSince.IsZero() {
		s.candidateSince = now
	}
	s.mu.Lock()
	quietSince := s.runStart
	if s.lastMember.After(quietSince) {
		quietSince = s.lastMember
	}
	rival := ""
	for id, ss := range s.seen {
		if ss.st.Candidate && !ss.st.Member && id < s.cfg.ID && now.Sub(ss.at) < s.cfg.BootstrapAfter {
			rival = id
		}
	}
	s.mu.Unlock()
	if now.Sub(s.candidateSince) < s.cfg.BootstrapAfter || now.Sub(quietSince) < s.cfg.BootstrapAfter || rival != "" {
		return
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.ID), Address: raft.ServerAddress(s.addr)}}}
	if err := n.raft.r.BootstrapCluster(conf).Error(); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: bootstrap")
		return
	}
	s.log.Info().Dur("quiet", now.Sub(quietSince)).
		Msg("merge arbiter: no group answered; bootstrapped one with this agent as its only voter")
}

// lead is the leader's part of a step: name the group if the log does not
// yet (names order groups by age: see olderGroup), then at most one
// configuration change.
func (s *Service) lead(ctx context.Context, n *serviceNode, conf raft.Configuration, peers, selected []Peer) {
	if n.raft.fsm.groupID() == "" {
		g := fmt.Sprintf("%020d-%s", time.Now().UnixNano(), s.cfg.ID)
		if _, err := n.raft.applyEntry(ctx, raftEntry{Group: g}); err != nil {
			s.log.Warn().Err(err).Msg("merge arbiter: name the group")
			return
		}
	}
	what, fut := s.reconcile(n.raft, conf, peers, selected)
	if fut == nil {
		return
	}
	log := s.log.With().Str("change", what).Strs("voters", members(conf, raft.Voter)).Logger()
	if err := fut.Error(); err != nil {
		log.Warn().Err(err).Msg("merge arbiter: configuration change failed")
		return
	}
	log.Info().Msg("merge arbiter: configuration changed")
	// Answer probes with the new configuration at once.
	if f := n.raft.r.GetConfiguration(); f.Error() == nil {
		s.mu.Lock()
		if s.node == n {
			s.self.Voters, s.self.Learners = members(f.Configuration(), raft.Voter), members(f.Configuration(), raft.Nonvoter)
		}
		s.mu.Unlock()
	}
}

// reconcile picks the next configuration change toward selected, if any
// (the group never has more than Voters+1 voters). A selected agent the
// leader cannot reach stays a learner (logged), not replaced by another:
// the group runs one voter short until its address is fixed.
func (s *Service) reconcile(n *RaftNode, conf raft.Configuration, peers, selected []Peer) (string, raft.Future) {
	self := s.cfg.ID
	timeout := s.cfg.Raft.ApplyTimeout
	live := map[string]Peer{}
	for _, p := range peers {
		if p.RaftAddr != "" {
			live[p.ID] = p
		}
	}
	desired := map[string]bool{}
	for _, p := range selected {
		desired[p.ID] = true
	}
	var voters, learners []raft.Server
	role := map[string]raft.ServerSuffrage{}
	liveVoters, undesired := 0, 0
	for _, sv := range conf.Servers {
		role[string(sv.ID)] = sv.Suffrage
		if sv.Suffrage != raft.Voter {
			learners = append(learners, sv)
			continue
		}
		voters = append(voters, sv)
		id := string(sv.ID)
		if _, ok := live[id]; ok {
			liveVoters++
		}
		if !desired[id] {
			undesired++
		}
	}
	slices.SortFunc(voters, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	// keepsMajority: with one voter removed, liveAfter of those left are
	// still a majority of them.
	keepsMajority := func(liveAfter int) bool { return liveAfter*2 > len(voters)-1 }

	// 1. A voter membership no longer lists is removed, while the live
	// voters stay a majority of what remains.
	for _, v := range voters {
		if _, ok := live[string(v.ID)]; ok {
			continue
		}
		if !keepsMajority(liveVoters) {
			s.blocked(fmt.Sprintf("cannot remove dead voter %s: %d live of %d voters would not be a majority", v.ID, liveVoters, len(voters)-1))
			break
		}
		return "remove dead voter " + string(v.ID), n.r.RemoveServer(v.ID, 0, timeout)
	}
	// 2. A live voter advertising a new address (restarted elsewhere).
	for _, v := range voters {
		id := string(v.ID)
		if p, ok := live[id]; ok && id != self && p.RaftAddr != string(v.Address) && s.ready(p) {
			return "move voter " + id + " to " + p.RaftAddr, n.r.AddVoter(v.ID, raft.ServerAddress(p.RaftAddr), 0, timeout)
		}
	}
	// 3. Learners (non-voters) no longer live or selected leave; they
	// count for no quorum.
	for _, l := range learners {
		if p, ok := live[string(l.ID)]; !ok || !desired[p.ID] || p.RaftAddr != string(l.Address) {
			return "remove learner " + string(l.ID), n.r.RemoveServer(l.ID, 0, timeout)
		}
	}
	// 4. A selected peer whose raft node runs joins, up to Voters (one
	// more while an unselected voter waits to be replaced: the group
	// never has more than Voters+1 voters). It joins as a learner first
	// and is promoted once it reports that it received the entry adding
	// it: a voter the leader cannot reach (wrong advertise address,
	// firewall) would otherwise count in the quorum at once, and a group
	// of one growing to two would wedge.
	grow := len(voters) < s.cfg.Voters || (len(voters) == s.cfg.Voters && undesired > 0)
	for _, p := range selected {
		r, in := role[p.ID]
		if !grow || (in && r == raft.Voter) {
			continue
		}
		st, fresh := s.stateOf(p.ID)
		switch {
		case !fresh || !st.Running || st.Member || st.Addr != p.RaftAddr:
		case !in:
			s.learnerSince[p.ID] = time.Now()
			return "add learner " + p.ID, n.r.AddNonvoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, timeout)
		case st.Learner:
			delete(s.learnerSince, p.ID)
			return "promote learner " + p.ID, n.r.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, timeout)
		default:
			if since, ok := s.learnerSince[p.ID]; ok && time.Since(since) > 10*s.fresh() {
				s.blocked(fmt.Sprintf("learner %s at %s has not caught up after %s: can this leader reach that address? (advertise)",
					p.ID, p.RaftAddr, time.Since(since).Round(time.Second)))
			}
		}
	}
	// 5. An unselected leader hands over to a selected voter.
	if !desired[self] && len(voters) > 1 {
		for _, v := range voters {
			if _, ok := live[string(v.ID)]; ok && string(v.ID) != self && desired[string(v.ID)] {
				return "hand leadership to " + string(v.ID), n.r.LeadershipTransferToServer(v.ID, v.Address)
			}
		}
	}
	// 6. Unselected voters beyond Voters leave.
	if len(voters) > s.cfg.Voters {
		for _, v := range voters {
			if string(v.ID) == self || desired[string(v.ID)] {
				continue
			}
			if !keepsMajority(liveVoters - 1) {
				s.blocked(fmt.Sprintf("keep unselected voter %s: live voters would not be a majority", v.ID))
				break
			}
			return "remove unselected voter " + string(v.ID), n.r.RemoveServer(v.ID, 0, timeout)
		}
	}
	s.lastBlocked = ""
	return "", nil
}

// ready reports whether p's raft node runs at p's address, outside any
// group, as its recent status says.
func (s *Service) ready(p Peer) bool {
	st, fresh := s.stateOf(p.ID)
	return fresh && st.Running && !st.Member && !st.Learner && st.Addr == p.RaftAddr
}

// stateOf is id's last status and whether it is recent.
func (s *Service) stateOf(id string) (wireState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.seen[id]
	return ss.st, ok && time.Since(ss.at) < s.fresh()
}

// blocked logs why reconciliation cannot proceed, once per reason.
func (s *Service) blocked(why string) {
	if why != s.lastBlocked {
		s.lastBlocked = why
		s.log.Warn().Msg("merge arbiter: " + why)
	}
}
