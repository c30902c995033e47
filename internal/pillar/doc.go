// Package pillar stores Salt pillar data in PostgreSQL and serves a node's merged pillar.
//
// A pillar row is a JSON object per (target, category): global, an org, a group or a node
// (migration 0008: unique per target and category, global included, deleted with its target,
// every change in pillar_history). A render reads the rows that apply to a node in the fixed
// order global, org, groups (lower spec.priority first, ties by name), node — each target's
// categories in byte order — and folds them with package pillar/merge, Salt's recurse
// strategy. Renders are cached per replica (Cache) and invalidated across replicas by
// LISTEN/NOTIFY (migration 0010); node_pillars (migration 0009) gives Salt's postgres
// ext_pillar the same rows in the same order; Import brings in a file-based tree read by
// package pillar/sls.
package pillar
