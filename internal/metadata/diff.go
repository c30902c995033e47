package metadata

// Diff compares a stored key set with the one a write asks for and returns what must be
// upserted (keys that are new or whose value changed) and what must be deleted (keys that
// are gone), so a PATCH of one label writes one row, not the whole set.
func Diff(old, new map[string]string) (set, gone map[string]string) {
	set, gone = map[string]string{}, map[string]string{}
	for k, v := range new {
		if ov, ok := old[k]; !ok || ov != v {
			set[k] = v
		}
	}
	for k, v := range old {
		if _, ok := new[k]; !ok {
			gone[k] = v
		}
	}
	return set, gone
}
