package kind

// SkipWriteLock makes s's writes skip the kind's shared key, for the control test that shows
// the registration race the key prevents.
func SkipWriteLock(s *Service) { s.skipWriteLock = true }

// PauseAfterScan makes s's next registrations call f between the data scan and the insert.
func PauseAfterScan(s *Service, f func()) { s.afterScan = f }

// PauseAfterUnlockedScan makes s's next registrations call f after the data scan that holds
// no key, before the locked re-check.
func PauseAfterUnlockedScan(s *Service, f func()) { s.afterUnlockedScan = f }

// SkipRecheck makes s's registrations trust their unlocked scan (no locked re-check of the
// objects written meanwhile), for the control test that shows what the re-check catches.
func SkipRecheck(s *Service) { s.skipRecheck = true }
