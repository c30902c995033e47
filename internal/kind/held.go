package kind

import (
	"context"
	"strings"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
)

// A Holder keeps values of a kind outside the resources table: package pillar's rows of
// categories bound to a kind (typed categories, formulas). The registry checks them as it
// checks the kind's own objects: a registration diffs against the revisions they were
// written under, scans them where a change needs the data, refuses a narrowing they violate,
// and has the holder present them under the new revision (its defaults filled in).
//
// Every method runs in the registration's transaction, which holds the kind's key
// exclusively; a holder's writers take it shared (through Admit) before they write, so what
// a scan reads stays true until the registration commits.
type Holder interface {
	// HeldRevisions returns the revisions of kind that held values were last admitted under.
	HeldRevisions(ctx context.Context, tx *db.Tx, kind string) ([]int, error)
	// ScanHeld calls fn with a label (HeldLabel) and the stored value of every held value of
	// kind.
	ScanHeld(ctx context.Context, tx *db.Tx, kind string, fn func(label string, raw []byte) error) error
	// MayReadAllHeld reports whether the caller (auth.FromContext) may read every value the
	// holder could hold, and otherwise the scope that would let it.
	MayReadAllHeld(ctx context.Context) (bool, string)
	// MayReadHeld reports whether the caller may read the value a HeldLabel names (its part
	// after the prefix): a stored report names a value only to such a caller, since naming
	// it says whether it passes a constraint (for a secret value, that needs the scope that
	// reads its plaintext).
	MayReadHeld(ctx context.Context, p *auth.Principal, name string) bool
	// Represent stores, for every held value of kind whose presentation under revision rev
	// differs from what is stored, present's result, and reports how many it changed (with
	// dryRun: would change, storing nothing). Rewriting a held value is a write of it, so the
	// holder refuses (403 naming the scope) when the caller (auth.FromContext) may not write
	// one that changes: kinds:write alone changes no value held outside the registry.
	Represent(ctx context.Context, tx *db.Tx, kind string, rev int, present func(raw []byte) ([]byte, error), dryRun bool) (int, error)
	// Represented runs after a registration whose Represent changed values has committed
	// (for example to drop cached renders on this replica before the registration answers).
	Represented()
}

// heldPrefix starts the label of a held value in a report: "pillar:node/web01/ntp" names
// category ntp of node web01. Objects are labelled org/name or name, and names never hold a
// colon, so the two never meet.
const heldPrefix = "pillar:"

// HeldLabel is the label a report gives a held value named name.
func HeldLabel(name string) string { return heldPrefix + name }

// SetHolder connects the registry to the holder of its kinds' values outside resources
// (one: package pillar); the server does this once at start.
func (s *Service) SetHolder(h Holder) { s.holder = h }

// heldName returns the holder's name of a held value's label.
func heldName(label string) (string, bool) { return strings.CutPrefix(label, heldPrefix) }
