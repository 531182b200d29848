package consensus

// Test hooks for the external test package.

// Forwarded is how many times this Service sent a request on the bus.
func (s *Service) Forwarded() int64 { return s.forwarded.Load() }

// AppliedLocally is how many times this Service applied a request on its
// own raft node because it led.
func (s *Service) AppliedLocally() int64 { return s.applied.Load() }
