package robustness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Recorded is what one history of a run leaves behind: its operations, the watch streams
// and list pages its clients read, its bulk applies, and the ground truth read after it
// drained. A run keeps it as files (Keep); a history can be checked again from them
// (ReadKept), for instance with a longer timeout or after a fix to a checker.
type Recorded struct {
	Ops     []*Op
	Streams []WatchStream
	Pages   []ListPage
	Bulk    []BulkApply
	Truth   Truth
}

// Checked is what CheckRecorded found.
type Checked struct {
	Resolved, Dropped int // unknown outcomes settled from the log, and dropped
	Linearizability   LinearizabilityResult
	Cached            CachedStats
	Violations        []Violation
}

// CheckRecorded runs every check that needs only the record (not the statuses, which
// are judged as the answers arrive): linearizability per key after Resolve, versions
// across keys, lists, watches, bulk applies and cached renders.
func CheckRecorded(r Recorded, timeout time.Duration) Checked {
	var c Checked
	var resolved []*Op
	resolved, c.Resolved, c.Dropped = Resolve(r.Ops, r.Truth)
	c.Linearizability = CheckLinearizable(resolved, timeout)
	vs := append([]Violation(nil), c.Linearizability.Violations...)
	vs = append(vs, CheckRVOrder(resolved)...)
	vs = append(vs, CheckLists(r.Pages, resolved, r.Truth)...)
	vs = append(vs, CheckWatches(r.Streams, r.Truth)...)
	vs = append(vs, CheckBulk(r.Bulk, r.Truth)...)
	var cachedBad []Violation
	cachedBad, c.Cached = CheckCachedRenders(resolved)
	c.Violations = append(vs, cachedBad...)
	return c
}

// keptFiles names the files of a kept history, in the order Keep writes them.
var keptFiles = []string{"watch.json", "lists.json", "bulk.json", "truth.json"}

// Keep writes r into dir: history.jsonl (one operation per line) and one JSON file each
// for the watch streams, list pages, bulk applies and ground truth.
func Keep(dir string, r Recorded) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteHistory(filepath.Join(dir, "history.jsonl"), r.Ops); err != nil {
		return err
	}
	for i, v := range []any{r.Streams, r.Pages, r.Bulk, r.Truth} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, keptFiles[i]), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadKept reads a history Keep wrote.
func ReadKept(dir string) (Recorded, error) {
	var r Recorded
	var err error
	if r.Ops, err = ReadHistory(filepath.Join(dir, "history.jsonl")); err != nil {
		return r, err
	}
	for i, v := range []any{&r.Streams, &r.Pages, &r.Bulk, &r.Truth} {
		b, err := os.ReadFile(filepath.Join(dir, keptFiles[i]))
		if err != nil {
			return r, err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return r, fmt.Errorf("%s: %w", keptFiles[i], err)
		}
	}
	return r, nil
}
