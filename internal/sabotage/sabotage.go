//go:build !sabotage

// Package sabotage holds the switches that break strata on purpose, so that the robustness
// checkers (package internal/robustness) can be shown to fire: a check that never fails
// proves nothing. The switches exist only in a binary built with the build tag sabotage
// (go build -tags sabotage); in every other build Active is a constant false and the
// compiler removes the hook points' code.
//
// The hook points, each one line beside the rule it breaks:
//   - "precondition": resource.lockForWrite ignores a write's resourceVersion precondition.
//   - "dropwatch": a watch subscription's live feed skips every change whose
//     resourceVersion is a multiple of 5 (the backlog read on a resume still has them).
//   - "earlyunlock": tfstate.Unlock releases a lock for any lock ID, not only its holder's.
//   - "memberstatus": resource.AddMember reports every membership as new (201 for a node
//     that already was a static member).
//   - "filterwatch": a filtered watch sends an object leaving its selection (or org) as
//     MODIFIED instead of DELETED.
//   - "cachedrop": pillar.Service.wrote does not drop the replica's cached renders after
//     its own write, and the cache applies each NOTIFY 100 ms late (as under load), so
//     read-your-writes rests on a notification that arrives after the answer.
//   - "stalebase": a replace or patch written from the list index's copy of its object
//     (resource.Service.updateFromIndex) does not check that the copy is still the stored
//     object, so a write from an overtaken copy overwrites what it never saw.
//
// A sabotaged binary reads the switches from the environment variable STRATA_SABOTAGE, a
// comma-separated list of their names.
package sabotage

// Active reports whether the named sabotage is switched on: never, in a normal build.
func Active(string) bool { return false }
