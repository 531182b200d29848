package cgroup

// DomainReads is how many times s listed a libvirt domain XML directory.
func DomainReads(s *Source) int64 { return s.domainReads.Load() }
