package compat

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// Decide turns the changes of one Diff plus the data scan's impacts (index into changes →
// Impact; a missing index means not scanned, i.e. clean) and the request's acknowledgements into
// a report. A change's verdict is IfAffected when its impact counts any object, else IfClean; an
// Acknowledge matched by an Ack (same Path, Rule equal to Change.Ack or Change.Rule) is reported
// acknowledged. An Ack that names no change is reported as a rejected
// "unknown-acknowledgement", so a typo cannot pass silently.
func Decide(changes []Change, impacts map[int]Impact, acks []Ack) Report {
	return DecideRevisions([]Against{{Changes: changes, Impacts: impacts}}, acks)
}

// Against is the diff of the new schema against one earlier revision still in use, with the
// impacts its data scan found.
type Against struct {
	Revision int
	Changes  []Change
	Impacts  map[int]Impact
}

// DecideRevisions is Decide over the diffs against several revisions (the latest and every
// older one still referenced by stored objects). Findings carry their revision in Against; an
// Ack is unknown only when it names a change in none of the diffs, because one acknowledgement
// legitimately matches the same change against several revisions.
func DecideRevisions(revisions []Against, acks []Ack) Report {
	used := make([]bool, len(acks))
	report := Report{Compatible: true, Changes: []Finding{}}
	for _, rev := range revisions {
		for i, c := range rev.Changes {
			f := Finding{Path: c.Path, Field: c.Field, Rule: c.Rule, Row: c.Row, Ack: c.Ack,
				Message: c.Message, WayForward: c.WayForward, Against: rev.Revision, Verdict: c.IfClean}
			if impact, scanned := rev.Impacts[i]; scanned {
				impact.Sample = append([]string{}, impact.Sample...)
				f.Impact = &impact
				if impact.Count > 0 {
					f.Verdict = c.IfAffected
					f.Message += affected(impact)
				}
			}
			for j, ack := range acks {
				// The path is the schema pointer (/properties/size) or the field the report
				// shows (/spec/size): one form, the report's, is enough to copy.
				if (ack.Path == c.Path || (c.Field != "" && ack.Path == c.Field)) && ack.Rule != "" && (ack.Rule == c.Ack || ack.Rule == c.Rule) {
					used[j] = true
					if f.Verdict == Acknowledge {
						f.Acknowledged = true
					}
				}
			}
			if f.Verdict != Accept && f.Verdict != Acknowledge && f.Verdict != Reject {
				f.Verdict = Reject // an unset verdict must never let a change through
			}
			if f.Verdict != Accept {
				f.WayForward = c.WayForward
			} else {
				f.WayForward = ""
			}
			if f.Verdict == Reject || (f.Verdict == Acknowledge && !f.Acknowledged) {
				report.Compatible = false
			}
			report.Changes = append(report.Changes, f)
		}
	}
	var unknown []Finding
	for j, ack := range acks {
		if used[j] {
			continue
		}
		unknown = append(unknown, Finding{Path: fault.Truncate(ack.Path, 200), Rule: "unknown-acknowledgement",
			Verdict: Reject, Ack: fault.Truncate(ack.Rule, 80),
			Message: fmt.Sprintf("--ack %s=%s names no change of this registration",
				fault.Truncate(ack.Path, 200), fault.Truncate(ack.Rule, 80)),
			WayForward: "remove it, or copy path and rule (or ack) from a finding of this report"})
		report.Compatible = false
	}
	sort.SliceStable(unknown, func(i, j int) bool {
		if unknown[i].Path != unknown[j].Path {
			return unknown[i].Path < unknown[j].Path
		}
		return unknown[i].Ack < unknown[j].Ack
	})
	report.Changes = append(report.Changes, unknown...)
	return report
}

// affected describes an impact for a finding's message.
func affected(impact Impact) string {
	noun := "objects are"
	if impact.Count == 1 {
		noun = "object is"
	}
	s := fmt.Sprintf("; %d stored %s affected", impact.Count, noun)
	if len(impact.Sample) > 0 {
		s += " (" + strings.Join(impact.Sample, ", ")
		if impact.Count > len(impact.Sample) {
			s += ", …"
		}
		s += ")"
	}
	return s
}
