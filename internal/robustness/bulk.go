package robustness

import (
	"encoding/json"
	"fmt"
)

// BulkLine is one line of a bulk node apply (POST /v1/nodes:apply) and the result the
// server reported for it; Result "" means no result arrived (the stream broke first: the
// outcome is unknown).
type BulkLine struct {
	Name    string          `json:"name"`
	Marker  string          `json:"marker"`
	Result  string          `json:"result,omitempty"` // created, updated, unchanged, error
	Problem json.RawMessage `json:"problem,omitempty"`
}

// BulkApply is one bulk apply request: several nodes written by one request, in one
// transaction per batch of 500 lines (docs/api.md, "Bulk apply of nodes"), so the workload's
// multi-change transactions.
type BulkApply struct {
	Replica int        `json:"replica"`
	Call    int64      `json:"call"`
	Return  int64      `json:"return"`
	Status  int        `json:"status"`
	Err     string     `json:"err,omitempty"`
	Lines   []BulkLine `json:"lines"`
}

// CheckBulk holds each bulk apply's reported results to the changes log: a line reported
// created or updated committed, so its marker is in the log (the change is durable, as an
// acknowledged single write is); a line reported as an error (with a problem that promises
// nothing was written) left no change; a line reported unchanged must find its own marker
// there (every line carries a marker no other line has, so the node can already be so only
// by this request's own earlier attempt). Each line's problem status must be an answer
// strata may give.
func CheckBulk(applies []BulkApply, truth Truth) []Violation {
	inLog := map[string]Change{}
	for _, c := range truth.Changes {
		if c.Kind == "Node" && c.Marker != "" {
			inLog[c.Marker] = c
		}
	}
	var out []Violation
	bad := func(a BulkApply, l BulkLine, msg string, args ...any) {
		out = append(out, Violation{Check: "bulk", Key: "Node//" + l.Name,
			Message: fmt.Sprintf("bulk apply on replica %d, line %s marker %s: ", a.Replica, l.Name, l.Marker) + fmt.Sprintf(msg, args...)})
	}
	for _, a := range applies {
		for _, l := range a.Lines {
			_, committed := inLog[l.Marker]
			switch l.Result {
			case "created", "updated":
				if !committed {
					bad(a, l, "reported %s, but the change is not in the changes log", l.Result)
				}
			case "unchanged":
				// The node already is as the line says: only if the line's own change is
				// there (a retry after this request's first attempt committed).
				if !committed {
					bad(a, l, "reported unchanged, though the node never carried the line's marker")
				}
			case "error":
				var p struct {
					Status int `json:"status"`
				}
				_ = json.Unmarshal(l.Problem, &p)
				o, why := Classify(p.Status, l.Problem, nil)
				if why != "" {
					bad(a, l, "reported an error: %s", why)
				} else if o == Failed && committed {
					bad(a, l, "reported an error (status %d) that promises nothing was written, but the change is in the log", p.Status)
				}
			case "":
			default:
				bad(a, l, "unknown result %q", l.Result)
			}
		}
	}
	return out
}
