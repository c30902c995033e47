// Package tfstate is strata's Terraform/OpenTofu state capability: projects, the HTTP
// backend's state operations, locks and versions. The HTTP layer calls Service methods one
// to one; this package never sees a request.
//
// # One table, two kinds of clients
//
// A project is a PostgreSQL schema holding the pg backend's states table as Terraform and
// OpenTofu create it (id bigint, name text UNIQUE, data text, a unique index states_by_name),
// except that the id comes from the project's own sequence (states_id_seq, a range per
// project) instead of the shared public.global_states_id_seq. The HTTP backend reads and
// writes the same rows, so backend "pg" with schema_name = "<project>" and strata's HTTP
// backend see the same workspaces and states, and a workspace can move between the two
// without -migrate-state. The project's history lives beside it (tf_state_versions,
// tf_placeholders, the one-row tf_project), written by an AFTER trigger that touches only
// that schema and changes no column, so every pg client version keeps working and the
// schema is self-contained: on Citus it is a distributed schema on one worker
// (docs/scale-out.md). Locks and projects stay in strata's schema.
//
// # Locks that hold against both
//
// An HTTP lock is a row (tf_locks): it outlives the request and strata restarts, and an
// INSERT … ON CONFLICT DO NOTHING decides every race between HTTP lockers. pg clients know
// nothing of rows; they take session advisory locks on the row id. So while an HTTP lock is
// held, strata also holds that key, in a session: the lock keeper, one dedicated connection
// per replica (db.Session) holding the keys of all the replica's locks, because a session
// per lock would exhaust connections, and a pooled connection would lose or strand the key.
// The keeper re-takes its keys after a reconnect or failover, reports a key it cannot get
// back as unprotected (LockStatus.Protected, Readiness), and takes over the locks of
// replicas whose keeper session is gone. An UNLOCK served by another replica deletes the row
// and NOTIFYs the owner, whose keeper then lets the key go; only when the owner replica has
// stopped heart-beating is its keeper backend terminated. Without a session URL there is no
// keeper: locks are rows only, pg clients are not excluded, and Readiness says so.
//
// Terraform's http backend locks before its first write, so a LOCK on a workspace without a
// row creates the row in that instant, holding a valid empty state (a placeholder: GET
// answers 404 for it, no version is recorded, an UNLOCK without a write removes it again),
// so that the keeper has a key to hold and pg clients cannot create the workspace meanwhile.
// Creating a row (LOCK or first write) takes both generations' workspace-creation keys, -1
// and OpenTofu's -fnv1_32(schema\0states), shared and for that transaction only: shared, so
// strata's creations in different projects never refuse each other; brief, because
// Terraform probes -1 on every lock in every schema. Every advisory call is a try: a key held
// by a pg client answers 423 at once with a LockInfo describing the holding backend, never a
// wait. Writes to existing rows take no creation key.
//
// # Write rules and versions
//
// A write is refused (409) when its serial is lower than the stored one on the same lineage,
// or when it changes the lineage of a state that still has resources; a state without
// resources may be replaced under any lineage (init -migrate-state does that); the same
// bytes again are a retry and succeed without a new version. Payloads strata cannot read
// (OpenTofu's client-side encryption) are stored as they come. Every write by any client
// becomes a version through the trigger (SECURITY DEFINER; strata passes its acting user with
// set_config), stored verbatim so MD5s match; restore writes an old version back with the
// next serial.
//
// # Encrypted projects
//
// A project created with encryption (or converted by ProjectEncrypt) stores every state
// sealed with the server's keys, in the same text column, as SealedPrefix and base64, bound
// to project and workspace; the trigger copies the ciphertext into versions and takes the
// plaintext's serial, lineage, MD5 and size from settings strata passes, and refuses
// plaintext written into such a project. Such a project is for the HTTP backend only. The
// design and its reasons are in encrypt.go.
package tfstate
