package consensus

import "strconv"

// Test hooks for the external test package.

// Forwarded is how many times this Service sent a request on the bus.
func (s *Service) Forwarded() int64 { return s.forwarded.Load() }

// AppliedLocally is how many times this Service applied a request on its
// own raft node because it led.
func (s *Service) AppliedLocally() int64 { return s.applied.Load() }

// LocalRecord is partition id's record in this Service's own raft state
// machine (no request: what this node applied).
func (s *Service) LocalRecord(id string) (Record, bool) {
	s.mu.Lock()
	n := s.node
	s.mu.Unlock()
	if n == nil {
		return Record{}, false
	}
	f := n.raft.fsm
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fsm.Get(id)
}

// LastLog is the index and term of this node's last raft log entry.
func (s *Service) LastLog() (index, term uint64) {
	s.mu.Lock()
	n := s.node
	s.mu.Unlock()
	if n == nil {
		return 0, 0
	}
	st := n.raft.r.Stats()
	index, _ = strconv.ParseUint(st["last_log_index"], 10, 64)
	term, _ = strconv.ParseUint(st["last_log_term"], 10, 64)
	return index, term
}
