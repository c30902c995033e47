package kind

// SkipWriteLock makes s's writes skip the kind's shared key, for the control test that shows
// the registration race the key prevents.
func SkipWriteLock(s *Service) { s.skipWriteLock = true }

// PauseAfterScan makes s's next registrations call f between the data scan and the insert.
func PauseAfterScan(s *Service, f func()) { s.afterScan = f }
