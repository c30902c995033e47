package resource

// ExposeGaps makes s read as the releases before migration 0015 did, taking every visible
// version at face value: the control of the tests that prove versions in flight are waited for.
func ExposeGaps(s *Service) { s.exposeGaps = true }

// WithKinds makes s serve the built-in kinds and ks: for tests proving that
// a rule follows from a descriptor, not from the built-in kinds' names.
func WithKinds(s *Service, ks ...*Kind) *Service {
	s.kinds = NewKinds(append([]*Kind{OrgKind(), NodeKind(), GroupKind()}, ks...)...)
	return s
}

// TrustStaleBases makes s write from its list index's copy without checking that the copy is
// still the stored object (stampAtCommit instead of stampIfUnchanged): the control of the
// stale-copy test.
func TrustStaleBases(s *Service) { s.trustStaleBases = true }
