// Package robustness checks whole histories that strata produces under concurrent clients
// and injected faults, as etcd's robustness suite does for etcd (research notes:
// docs/robustness.md). Targeted tests check the cases someone thought of; a whole-history
// check turns a bug nobody wrote a test for into an impossible history.
//
// # What is recorded
//
// Every client operation is an Op: its call and return times on one monotonic clock (a
// Recorder's base time, never wall clock, which can reorder events), its outcome (OK, Failed
// or Unknown) and a unique marker it writes (an annotation robustness/op on objects, a
// field robustness_op in pillar data, the lock id on Terraform locks), sent with its own
// X-Request-Id. An operation whose outcome is unknown (a transport error, a 503 whose
// problem says "outcome": "unknown", a 504) keeps Return = math.MaxInt64: guessing a return
// time produced false failures in etcd.
//
// # What is checked, and why
//
//   - Linearizability per key (Porcupine): an object is a register with compare-and-set by
//     resourceVersion (create, PUT with and without a precondition, merge PATCH, DELETE,
//     GET); a pillar row is a register with compare-and-set by ETag, read by GET and by
//     strict renders (Cache-Control: no-cache), which docs/api.md promises see every write
//     committed before the request on any replica; a Terraform workspace lock admits one
//     holder across HTTP LOCK/UNLOCK and pg-backend clients' advisory keys, and a state
//     write (POST ?ID=) succeeds only under its lock. Partitioning per key keeps the search
//     small; a check that times out fails (Porcupine's Unknown is not a pass). The search
//     is Porcupine's plus one rule (linearize.go): an operation that never changes the
//     state is placed as soon as it fits, which keeps the refusals a paused replica
//     leaves behind from multiplying the search.
//   - Before checking, each Unknown write is resolved from the database's own log (Resolve:
//     the changes log for objects, pillar_history for pillar rows, the audit log by the
//     client's request id for locks), never from the streams under test: applied writes
//     become OK at their resourceVersion, absent ones are dropped. Only what the log cannot
//     tell stays non-deterministic (the model forks: applied or not).
//   - Across keys (CheckRVOrder): successful writes have unique resourceVersions, and a
//     write that returned before another was sent has the lower one.
//   - Lists (CheckLists) are reads of every object they cover: a page answered at version R
//     equals the replayed changes log at R for the names it covers, selector applied, and R
//     is at least the version of every write acknowledged before the page was asked for.
//   - Watches (CheckWatches), per stream against the replayed log: ordered (strictly
//     increasing versions), unique, reliable (every matching change exactly once, between
//     the stream's start and the last version it confirmed), of the right type and content,
//     resumable (each reconnect continues right after the last delivered version or
//     bookmark), bookmarks never ahead of events, 410 only below the compaction floor.
//   - Statuses (Classify): 200/201/204, 404 where the model decides existence, 409, 412,
//     422, 423 and 503 are answers; 503 with "outcome": "unknown", 504 and transport errors
//     are unknown outcomes; anything else (500, 502, a 400 for a well-formed request) is a
//     violation by itself.
//
// On a failure the checker prints the smallest sub-history of the failing key it can find
// that is still not linearizable, and writes the full history as JSON lines to a file.
//
// A run keeps each history as files (Keep); CheckRecorded checks them again, and so does
// the command internal/robustness/recheck.
//
// The live run (TestRobustness, build tag robustness) drives real strata replicas over one
// PostgreSQL with the faults of package internal/robustness/chaos; controls build strata
// with the build tag sabotage (package internal/sabotage) to show each checker fires.
package robustness
