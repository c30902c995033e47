// Package compat decides whether a new revision of a kind's spec schema may replace an older one.
//
// strata kinds evolve in place, without API versions (issue 10, research §5): a new revision is
// diffed against the previous ones and every difference is classified by the rule table of
// research §5.2. Some rows are safe whatever is stored (accept), some are safe only if the user
// says they have prepared their readers (acknowledge), some are never safe (reject), and some
// depend on the data actually stored: those carry a Check that the registry runs over the stored
// objects in PostgreSQL before Decide turns the changes into a verdict. This package is pure: it
// never touches the database, so the classification can be tested exhaustively and fuzzed.
//
// Conventions the integrator relies on:
//   - Change.Path is a JSON pointer into the spec schema ("/properties/a/items/properties/b");
//     the root node is "". Change.Field is the instance path for humans ("/spec/a/*/b").
//   - Description, title, examples, $comment, readOnly/writeOnly and unknown x- annotations are
//     not reported at all: they change neither data nor validation.
//   - A change inside an added, removed, tombstoned or type-changed subtree is reported once, at
//     the subtree.
//   - Row 22 of §5.2 (transition rules) does not apply: strata schemas have no transition rules.
//
// Simplifications, chosen to be conservative:
//   - allOf/anyOf/oneOf/not are compared as whole values. Added, or changed so that the set of
//     accepted values can only shrink (an allOf entry added, an anyOf branch removed), they are a
//     tightening (row 16: Violations check, accept with impact). Removed, or changed so that they
//     can only widen, they are a loosening (row 18). Any other change is reported as
//     "<kw>-changed" with a Violations check and the row-18 verdict, because we cannot tell
//     which way it goes.
//   - A keyword outside the structural subset that changes is reported as "<kw>-changed" with
//     a Violations check and the row-18 verdict (acknowledge readersHandleWiderValues).
//   - Any change of x-list-map-keys (added, removed or changed) is rejected: it changes how
//     list items are correlated for ratcheting and which items count as duplicates.
//   - Loosenings are accepted without acknowledgement when the property (or an ancestor) is
//     marked "x-user-only": true in the new schema: nothing but users reads it, so wider values
//     cannot break a controller.
//   - Aliases are as permanent as names: removing a name from x-aliases is rejected, and an
//     alias that revives a tombstoned property or merges a removed property into one that
//     already existed is rejected.
package compat

import (
	"encoding/json"
	"strings"
)

// Verdict is what a change means for a registration.
type Verdict string

const (
	// Accept lets the registration proceed.
	Accept Verdict = "accept"
	// Acknowledge lets it proceed only when the request carries an Ack naming Path and Rule.
	Acknowledge Verdict = "acknowledge"
	// Reject refuses the registration.
	Reject Verdict = "reject"
)

// Check is a data-aware check the registry must run over the stored objects for one change.
type Check string

const (
	// NoCheck means the verdict does not depend on the data.
	NoCheck Check = ""
	// Violations counts objects whose spec violates the NEW schema in a way Change.Counts
	// accepts (at Path with one of Keywords, or below Path/<keyword>/).
	Violations Check = "violations"
	// Present counts objects holding a value at Path (HasValue).
	Present Check = "present"
	// Absent counts objects where an instance of Path's parent exists without the key (Lacks).
	Absent Check = "absent"
)

// The acknowledgement names of research §5.2.
const (
	AckNewWritesOnly                = "newWritesOnly"
	AckReadersHandleAbsence         = "readersHandleAbsence"
	AckDropData                     = "dropData"
	AckReadersUpgraded              = "readersUpgraded"
	AckReadersUpgradedFirst         = "readersUpgradedFirst"
	AckReadersHandleNewValue        = "readersHandleNewValue"
	AckReadersHandleWiderValues     = "readersHandleWiderValues"
	AckDefaultEqualsAbsentBehaviour = "defaultEqualsAbsentBehaviour"
)

// Change is one classified difference between two revisions.
type Change struct {
	// Path is a JSON pointer into the schema, e.g. "/properties/size"; "" is the root.
	Path string
	// Field is the instance path for humans, e.g. "/spec/size" or "/spec/a/*/b".
	Field string
	// Rule is the stable rule id, e.g. "property-added" or "maximum-tightened".
	Rule string
	// Row is the row of research §5.2 the rule implements.
	Row int
	// Ack is the acknowledgement name that accepts the change when its verdict is Acknowledge.
	Ack string
	// Check is the data-aware check deciding between IfClean and IfAffected.
	Check Check
	// Keywords are, for Check == Violations, the keywords at Path whose violations count.
	Keywords []string
	// IfClean is the verdict when the check finds no affected object (or there is no check).
	IfClean Verdict
	// IfAffected is the verdict when the check finds some.
	IfAffected Verdict
	// Message explains the change and its risk.
	Message string
	// WayForward says, for possible rejections, what to do instead.
	WayForward string
}

// Counts reports whether one violation found by validating a stored spec with the NEW schema
// belongs to this change's Violations check. schemaPath and keyword are those of
// schema.Violation: the pointer of the schema node owning the offending value and the failing
// keyword. A violation counts when it is at Path with one of Keywords, or anywhere below
// Path/<keyword>/ for one of Keywords (a failure inside an added anyOf, items or properties
// subtree). For "additionalProperties" an unknown key may also be reported at the pointer of the
// would-be property (Path/properties/<key>); that counts too.
func (c Change) Counts(schemaPath, keyword string) bool {
	if c.Check != Violations {
		return false
	}
	for _, k := range c.Keywords {
		if schemaPath == c.Path && keyword == k {
			return true
		}
		if strings.HasPrefix(schemaPath, c.Path+"/"+k+"/") {
			return true
		}
		if k == "additionalProperties" && keyword == k {
			rest, ok := strings.CutPrefix(schemaPath, c.Path+"/properties/")
			if ok && rest != "" && !strings.Contains(rest, "/") {
				return true
			}
		}
	}
	return false
}

// Impact is what the data scan found for one change (by index into the Diff result).
type Impact struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample"` // up to 10 object names
}

// Ack is one acknowledgement a registration request carries. Rule may name either the
// change's acknowledgement (Change.Ack, e.g. "newWritesOnly") or its rule id (Change.Rule,
// e.g. "required-property-added"); both are accepted so users can copy either from a report.
type Ack struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
}

// Report is the result of a registration check, serialised in the API response.
type Report struct {
	// Compatible is true when no finding is rejected and every acknowledge is acknowledged.
	Compatible bool      `json:"compatible"`
	Changes    []Finding `json:"changes"`
}

// Finding is one change with its final verdict, as the API reports it.
type Finding struct {
	Path         string  `json:"path"`
	Field        string  `json:"field,omitempty"`
	Rule         string  `json:"rule"`
	Row          int     `json:"row,omitempty"`
	Verdict      Verdict `json:"verdict"`
	Acknowledged bool    `json:"acknowledged"`
	Ack          string  `json:"ack,omitempty"`
	Message      string  `json:"message"`
	WayForward   string  `json:"wayForward,omitempty"`
	Impact       *Impact `json:"impact,omitempty"`
	// Against is the revision this change is relative to (set by Decide's caller or by
	// DecideRevisions).
	Against int `json:"against,omitempty"`
}

// MarshalJSON keeps Sample an array (never null) so clients can iterate it unconditionally.
func (i Impact) MarshalJSON() ([]byte, error) {
	type plain Impact
	if i.Sample == nil {
		i.Sample = []string{}
	}
	return json.Marshal(plain(i))
}
