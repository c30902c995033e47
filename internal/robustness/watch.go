package robustness

import (
	"fmt"
	"sort"
)

// WatchEvent is one line of a watch stream as a watcher received it.
type WatchEvent struct {
	Type   string `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	Name   string `json:"name,omitempty"`
	RV     int64  `json:"rv,omitempty"`
	Marker string `json:"marker,omitempty"`
	Status int    `json:"status,omitempty"` // ERROR: the problem's status
	Reason string `json:"reason,omitempty"` // ERROR: the problem's reason
	At     int64  `json:"at"`               // receive time on the recorder's clock
}

// WatchSegment is one watch request: from version From (exclusive), the events received,
// and how it ended. Status is the HTTP status when the request itself was refused (410 gone,
// 504 beyond the head, 503), 0 when the stream was opened.
type WatchSegment struct {
	From   int64        `json:"from"`
	Status int          `json:"status,omitempty"`
	Events []WatchEvent `json:"events"`
	End    string       `json:"end"` // eof, error event, transport error, …
}

// WatchStream is one watcher's life: segment after segment, each resuming from the last
// version the previous ones delivered (an event's or a bookmark's). A stream refused with
// 410 ends there (the watcher lists again and starts a new stream from the list's version).
type WatchStream struct {
	Name     string         `json:"name"`
	Replica  int            `json:"replica"`
	Kind     string         `json:"kind"`
	Segments []WatchSegment `json:"segments"`
	// Selector and Org are the stream's filters (labelSelector; org, for nodes): its events
	// are about membership in the selection (docs/api.md, "Label selectors", "Nodes by
	// org"), so it is checked against the log filtered by FilterChanges.
	Selector map[string]string `json:"selector,omitempty"`
	Org      string            `json:"org,omitempty"`
}

// FilterChanges is the changes log (one kind, in version order) as a watch with a label
// selector and/or an org filter must send it: each change is judged by whether its object
// was in the selection before it (from the replay of the changes before it, never from the
// log's own prev_labels or prev_org, which strata's watch reads) and after it. Into the
// selection is ADDED, out of it DELETED (carrying the object as it is now), within it
// MODIFIED; a change outside it before and after is not sent. With neither filter the log is
// returned as it is.
func FilterChanges(log []Change, selector map[string]string, org string) []Change {
	if len(selector) == 0 && org == "" {
		return log
	}
	in := func(c Change) bool {
		return c.Type != "DELETED" && matches(selector, c.Labels) && (org == "" || c.SpecOrg == org)
	}
	before := map[string]bool{}
	var out []Change
	for _, c := range log {
		was, is := before[c.Name], in(c)
		before[c.Name] = is
		switch {
		case !was && is:
			c.Type = "ADDED"
		case was && !is:
			c.Type = "DELETED"
		case was && is:
			c.Type = "MODIFIED"
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// CheckWatches checks every stream against the changes log (research §3.5): events in
// strictly increasing version order (ordered, unique), bookmarks never below a delivered
// event and never followed by an event at or below them, each resume continuing right after
// the last version delivered, every change of the kind delivered exactly once between the
// stream's start and the last version it confirmed (reliable), with the log's type, name and
// marker, and 410 only for a version below the compaction floor. An ERROR event other than
// 503 (the replica stopping or the watcher cut off as too slow) or a valid 410 is a
// violation, as is a refused resume with any other status than 503.
func CheckWatches(streams []WatchStream, truth Truth) []Violation {
	byKind := map[string][]Change{}
	for _, c := range truth.Changes {
		byKind[c.Kind] = append(byKind[c.Kind], c)
	}
	for k := range byKind {
		cs := byKind[k]
		sort.Slice(cs, func(i, j int) bool { return cs[i].RV < cs[j].RV })
	}
	var out []Violation
	for _, st := range streams {
		out = append(out, checkStream(st, FilterChanges(byKind[st.Kind], st.Selector, st.Org), truth.CompactedThrough)...)
	}
	return out
}

func checkStream(st WatchStream, log []Change, floor int64) []Violation {
	var out []Violation
	bad := func(check, msg string, a ...any) {
		out = append(out, Violation{Check: "watch-" + check, Key: st.Name, Message: fmt.Sprintf(msg, a...)})
	}
	if len(st.Segments) == 0 {
		return nil
	}
	start := st.Segments[0].From
	confirmed := start
	var delivered []WatchEvent
	for i, seg := range st.Segments {
		if i > 0 && seg.From != confirmed {
			bad("resumable", "segment %d resumed from %d, not from the last version delivered (%d)", i, seg.From, confirmed)
		}
		switch seg.Status {
		case 0, 200:
		case 410:
			if seg.From >= floor {
				bad("410", "a watch from %d was refused with 410, but the compaction floor is %d", seg.From, floor)
			}
			continue
		case 503:
			continue
		default:
			bad("status", "a watch from %d was refused with status %d", seg.From, seg.Status)
			continue
		}
		for _, ev := range seg.Events {
			switch ev.Type {
			case "BOOKMARK":
				if ev.RV < confirmed {
					bad("bookmark", "segment %d: bookmark %d below the last version delivered (%d)", i, ev.RV, confirmed)
				} else {
					confirmed = ev.RV
				}
			case "ERROR":
				switch {
				case ev.Status == 503:
				case ev.Status == 410 && seg.From < floor:
				case ev.Status == 410:
					bad("410", "segment %d from %d ended with 410, but the compaction floor is %d", i, seg.From, floor)
				default:
					bad("status", "segment %d ended with an ERROR event of status %d (%s)", i, ev.Status, ev.Reason)
				}
			default:
				if ev.RV <= confirmed {
					bad("ordered", "segment %d: %s %s at %d after version %d was delivered", i, ev.Type, ev.Name, ev.RV, confirmed)
					continue
				}
				confirmed = ev.RV
				delivered = append(delivered, ev)
			}
		}
	}
	// Reliable: exactly the log's changes in (start, confirmed].
	var want []Change
	for _, c := range log {
		if c.RV > start && c.RV <= confirmed {
			want = append(want, c)
		}
	}
	i, j := 0, 0
	for i < len(want) || j < len(delivered) {
		switch {
		case j == len(delivered) || (i < len(want) && want[i].RV < delivered[j].RV):
			bad("reliable", "change %d (%s %s) was never delivered, though the stream confirmed everything through %d", want[i].RV, want[i].Type, want[i].Name, confirmed)
			i++
		case i == len(want) || delivered[j].RV < want[i].RV:
			bad("reliable", "event %s %s at %d is not in the changes log", delivered[j].Type, delivered[j].Name, delivered[j].RV)
			j++
		default:
			w, d := want[i], delivered[j]
			if w.Type != d.Type || w.Name != d.Name || w.Marker != d.Marker {
				bad("content", "event at %d is %s %s marker %q; the log has %s %s marker %q", d.RV, d.Type, d.Name, d.Marker, w.Type, w.Name, w.Marker)
			}
			i++
			j++
		}
	}
	return out
}

// ListItem is one object of a list page.
type ListItem struct {
	Name   string `json:"name"`
	RV     int64  `json:"rv"`
	Marker string `json:"marker,omitempty"`
}

// ListPage is one page of a list: its request (selector, the previous page's last name),
// its call and return times, and its answer.
type ListPage struct {
	Kind     string            `json:"kind"`
	Replica  int               `json:"replica"`
	Selector map[string]string `json:"selector,omitempty"`
	After    string            `json:"after,omitempty"` // the previous page's last name ("" for the first page)
	Last     bool              `json:"last"`            // no continue token: the list ends here
	Call     int64             `json:"call"`
	Return   int64             `json:"return"`
	RV       int64             `json:"rv"`
	Items    []ListItem        `json:"items"`
}

// CheckLists checks every page as a read of each object it covers (research §3.4): the
// page equals the replayed changes log at its version for the names after the previous
// page's last name up to its own last one (to the end on the last page), selector applied;
// and its version is at least that of every write of the kind acknowledged before the page
// was asked for (a list is linearizable).
func CheckLists(pages []ListPage, ops []*Op, truth Truth) []Violation {
	var out []Violation
	changes := append([]Change(nil), truth.Changes...)
	sort.Slice(changes, func(i, j int) bool { return changes[i].RV < changes[j].RV })
	order := make([]int, len(pages))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return pages[order[a]].RV < pages[order[b]].RV })
	state := map[string]map[string]replayObj{} // kind → name → object
	ci := 0
	for _, pi := range order {
		p := pages[pi]
		for ci < len(changes) && changes[ci].RV <= p.RV {
			c := changes[ci]
			if state[c.Kind] == nil {
				state[c.Kind] = map[string]replayObj{}
			}
			if c.Type == "DELETED" {
				delete(state[c.Kind], c.Name)
			} else {
				state[c.Kind][c.Name] = replayObj{RV: c.RV, Marker: c.Marker, Labels: c.Labels}
			}
			ci++
		}
		upTo := ""
		if len(p.Items) > 0 {
			upTo = p.Items[len(p.Items)-1].Name
		}
		var want []ListItem
		for name, o := range state[p.Kind] {
			if name <= p.After || (!p.Last && name > upTo) || !matches(p.Selector, o.Labels) {
				continue
			}
			if !p.Last && upTo == "" {
				continue
			}
			want = append(want, ListItem{Name: name, RV: o.RV, Marker: o.Marker})
		}
		sort.Slice(want, func(i, j int) bool { return want[i].Name < want[j].Name })
		if !equalItems(want, p.Items) {
			out = append(out, Violation{Check: "list", Key: p.Kind,
				Message: fmt.Sprintf("page at rv %d (after %q, selector %v, replica %d) holds %v; the log at %d has %v", p.RV, p.After, p.Selector, p.Replica, p.Items, p.RV, want)})
		}
	}
	// Linearizable: the version covers every write acknowledged before the call.
	var acked []*Op
	for _, op := range ops {
		if op.Family == "object" && op.IsWrite() && op.Outcome == OK && op.RV > 0 && op.Return != Never {
			acked = append(acked, op)
		}
	}
	sort.Slice(acked, func(i, j int) bool { return acked[i].Return < acked[j].Return })
	for _, p := range pages {
		n := sort.Search(len(acked), func(i int) bool { return acked[i].Return >= p.Call })
		for _, w := range acked[:n] {
			if kindOfKey(w.Key) == p.Kind && w.RV > p.RV {
				out = append(out, Violation{Check: "list-stale", Key: p.Kind,
					Message: fmt.Sprintf("page at rv %d (replica %d) was asked for after write rv %d was acknowledged", p.RV, p.Replica, w.RV),
					History: []string{w.String()}})
				break
			}
		}
	}
	return out
}

func kindOfKey(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i]
		}
	}
	return key
}

func equalItems(a, b []ListItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
