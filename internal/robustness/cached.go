package robustness

import (
	"fmt"
	"sort"
	"time"
)

// CachedStats is what the cached-render check measured: how many renders it checked and how
// far behind the newest acknowledged write the stalest one was (across replicas; docs/api.md
// measures this, p99 about 1 ms idle, "more under load", and promises no bound).
type CachedStats struct {
	Renders   int
	Stale     int           // renders that missed a write acknowledged (by another replica) before they were asked for
	MaxBehind time.Duration // the longest time from such a write's answer to a render that missed it
}

// CheckCachedRenders checks the renders served from a replica's cache (family "cached":
// GET /v1/nodes/{node}/pillar without Cache-Control: no-cache) against the pillar writes of
// the same row, resolved from the database (docs/api.md, "Each replica caches rendered
// pillars"). What is promised is checked: a cached render shows a value some write stored,
// one that was sent before the render answered (never invented, never from the future), and
// never predates a write its own replica acknowledged before the render was asked for
// (read-your-writes on a replica). Across replicas the docs give a measurement, not a bound,
// so a render that missed another replica's write is counted and measured, not a violation.
func CheckCachedRenders(ops []*Op) ([]Violation, CachedStats) {
	var st CachedStats
	writes := map[string][]*Op{} // key → OK pillar puts
	byMarker := map[string]*Op{}
	for _, op := range ops {
		if op.Family == "pillar" && op.Kind == "put" && op.Outcome == OK {
			writes[op.Key] = append(writes[op.Key], op)
			byMarker[op.Marker] = op
		}
	}
	for _, ws := range writes {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Return < ws[j].Return })
	}
	var out []Violation
	for _, r := range ops {
		if r.Family != "cached" || r.Outcome != OK {
			continue
		}
		st.Renders++
		var seen *Op
		if r.Exists {
			seen = byMarker[r.ReadMarker]
			if seen == nil || seen.Key != r.Key || seen.Call > r.Return {
				out = append(out, Violation{Check: "cached-render", Key: r.Key,
					Message: fmt.Sprintf("a cached render shows marker %q, which no write of the row stored before the render answered", r.ReadMarker),
					History: []string{r.String()}})
				continue
			}
		}
		// A write that returned before the render was called, and that the value seen
		// precedes in real time (or there was no value): the render predates it.
		missed := func(w *Op) bool {
			return w.Return < r.Call && (seen == nil || seen.Return < w.Call)
		}
		var own, other *Op
		for _, w := range writes[r.Key] {
			if !missed(w) {
				continue
			}
			if w.Replica == r.Replica && own == nil {
				own = w
			}
			if other == nil || w.Return < other.Return {
				other = w
			}
		}
		if own != nil {
			h := []string{own.String(), r.String()}
			if seen != nil {
				h = append([]string{seen.String()}, h...)
			}
			out = append(out, Violation{Check: "cached-render", Key: r.Key,
				Message: fmt.Sprintf("replica %d served a cached render older than a write it had acknowledged before the render was asked for (read-your-writes)", r.Replica),
				History: h})
			continue
		}
		if other != nil {
			st.Stale++
			if d := time.Duration(r.Call - other.Return); d > st.MaxBehind {
				st.MaxBehind = d
			}
		}
	}
	return out, st
}
