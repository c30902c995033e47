package tfstate

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/secret"
)

func testKey(t testing.TB) secret.Key {
	t.Helper()
	raw := make([]byte, secret.KeySize)
	_, _ = rand.Read(raw)
	k, err := secret.NewKey(raw)
	require.NoError(t, err)
	return k
}

func testKeyring(t testing.TB, keys ...secret.Key) *secret.Keyring {
	t.Helper()
	r, err := secret.NewKeyring(keys...)
	require.NoError(t, err)
	return r
}

// secretState is a version 4 state whose output and resource attribute hold value.
func secretState(serial int64, lineage, value string) []byte {
	return fmt.Appendf(nil, `{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": %d,
  "lineage": %q,
  "outputs": {"password": {"value": %q, "type": "string", "sensitive": true}},
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "x", "provider": "provider[\"terraform.io/builtin/terraform\"]",
    "instances": [{"schema_version": 0, "attributes": {"id": "x", "input": %q}}]}],
  "check_results": null
}
`, serial, lineage, value, value)
}

// storedData reads what a workspace's states row holds, as a pg client would.
func storedData(t *testing.T, b *testBundle, project, workspace string) string {
	t.Helper()
	s := rawSession(t, b.url)
	var data string
	require.NoError(t, s.QueryRow(context.Background(), pq("OfflineState", project), workspace).Scan(&data))
	return data
}

// TestEncryptedProjectRoundTrip: an encrypted project stores only ciphertext, in the states
// row and in every version, and serves the plaintext through every read of the HTTP backend:
// GET (with the plaintext's MD5), versions (serial, lineage, MD5 and size of the plaintext),
// version GET, restore, outputs-only reads and workspace listings; a LOCK's placeholder is
// sealed too.
func TestEncryptedProjectRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{opts: Options{Keys: testKeyring(t, testKey(t))}})
	p, created, err := b.svc.ProjectCreate(ctx, b.actor, "enc", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, p.Encryption)
	got, err := b.svc.ProjectGet(ctx, "enc")
	require.NoError(t, err)
	require.True(t, got.Encryption)
	again, created, err := b.svc.ProjectCreate(ctx, b.actor, "enc", ProjectOptions{})
	require.NoError(t, err, "PUT stays idempotent")
	require.False(t, created)
	require.True(t, again.Encryption)

	// A LOCK on a new workspace makes a sealed placeholder, still a 404 for GET.
	_, err = b.svc.Lock(ctx, b.actor, "enc", "default", lockBody("L1"))
	require.NoError(t, err)
	require.True(t, IsSealedState(storedData(t, b, "enc", "default")))
	_, err = b.svc.StateGet(ctx, "enc", "default")
	requireKind(t, err, fault.KindNotFound)

	s1 := secretState(1, "lin-1", "hunter2-first")
	w1, err := b.svc.StateWrite(ctx, b.actor, "enc", "default", WriteRequest{LockID: "L1", Body: s1})
	require.NoError(t, err)
	require.Equal(t, md5.Sum(s1), w1.MD5)
	s2 := secretState(2, "lin-1", "hunter2-second")
	w2, err := b.svc.StateWrite(ctx, b.actor, "enc", "default", WriteRequest{LockID: "L1", Body: s2})
	require.NoError(t, err)
	retry, err := b.svc.StateWrite(ctx, b.actor, "enc", "default", WriteRequest{LockID: "L1", Body: s2})
	require.NoError(t, err)
	require.True(t, retry.Unchanged, "the same plaintext again is a retry, though each sealing differs")
	_, err = b.svc.StateWrite(ctx, b.actor, "enc", "default", WriteRequest{LockID: "L1", Body: secretState(1, "lin-1", "x")})
	requireKind(t, err, fault.KindConflict) // the write rules judge the plaintext
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "enc", "default", UnlockRequest{ID: "L1"}))

	stored := storedData(t, b, "enc", "default")
	require.True(t, IsSealedState(stored), stored)
	require.NotContains(t, stored, "hunter2")
	require.NotContains(t, stored, "lin-1")

	st, err := b.svc.StateGet(ctx, "enc", "default")
	require.NoError(t, err)
	require.Equal(t, string(s2), string(st.Data))
	require.Equal(t, md5.Sum(s2), st.MD5, "Content-MD5 is the plaintext's")

	vs, err := b.svc.VersionList(ctx, "enc", "default")
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, w2.Version, vs[0].N)
	require.Equal(t, hexOf(md5.Sum(s2)), vs[0].MD5)
	require.Equal(t, int64(len(s2)), vs[0].Size)
	require.Equal(t, int64(2), *vs[0].Serial)
	require.Equal(t, "lin-1", vs[0].Lineage)
	require.Equal(t, hexOf(md5.Sum(s1)), vs[1].MD5)
	_, data, err := b.svc.VersionGet(ctx, "enc", "default", w1.Version)
	require.NoError(t, err)
	require.Equal(t, string(s1), string(data))

	ws, _, err := b.svc.WorkspaceList(ctx, "enc", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, int64(2), *ws[0].Serial)
	require.Equal(t, "lin-1", ws[0].Lineage)
	require.Equal(t, int64(len(s2)), ws[0].Size)

	out, err := b.svc.StateGetOutputs(ctx, "enc", "default")
	require.NoError(t, err)
	require.Contains(t, string(out.Data), "hunter2-second")
	require.NotContains(t, string(out.Data), "terraform_data")

	res, err := b.svc.VersionRestore(ctx, b.actor, "enc", "default", w1.Version, "")
	require.NoError(t, err)
	st, err = b.svc.StateGet(ctx, "enc", "default")
	require.NoError(t, err)
	m := parseState(st.Data)
	require.Equal(t, int64(3), m.Serial, "restore bumps the serial of the plaintext")
	require.Contains(t, string(st.Data), "hunter2-first")
	vs, err = b.svc.VersionList(ctx, "enc", "default")
	require.NoError(t, err)
	require.Equal(t, res.Version, vs[0].N)
	require.Equal(t, "restore", vs[0].Source)

	// Every version holds ciphertext only.
	s := rawSession(t, b.url)
	require.False(t, rawBool(t, s, `SELECT bool_or(NOT starts_with(data, 'strata:sv1:') OR data LIKE '%hunter2%') FROM enc.tf_state_versions`))
}

func pqRaw(sql string) *db.Query { return &db.Query{Name: "test", Text: sql} }

func hexOf(sum [md5.Size]byte) string { return hex.EncodeToString(sum[:]) }

// TestEncryptedCiphertextMovedDoesNotOpen: a sealed state copied into another workspace's
// row (by someone who can write the database but has no key) does not decrypt there: the
// read fails (500, ErrTampered) instead of serving it under the other name. A plaintext
// write into an encrypted project, as a pg backend client would make one, is refused by the
// trigger.
func TestEncryptedCiphertextMovedDoesNotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{opts: Options{Keys: testKeyring(t, testKey(t))}})
	_, _, err := b.svc.ProjectCreate(ctx, b.actor, "enc", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "enc", "a", WriteRequest{Body: secretState(1, "la", "value-a")})
	require.NoError(t, err)
	_, err = b.svc.StateWrite(ctx, b.actor, "enc", "b", WriteRequest{Body: secretState(1, "lb", "value-b")})
	require.NoError(t, err)

	s := rawSession(t, b.url)
	rawExec(t, s, `UPDATE enc.states SET data = (SELECT data FROM enc.states WHERE name = 'a') WHERE name = 'b'`)
	_, err = b.svc.StateGet(ctx, "enc", "b")
	fe := requireKind(t, err, fault.KindInternal)
	require.ErrorIs(t, fe, secret.ErrTampered)
	st, err := b.svc.StateGet(ctx, "enc", "a")
	require.NoError(t, err, "the original still opens")
	require.Contains(t, string(st.Data), "value-a")

	// Moved within the versions table too.
	rawExec(t, s, `UPDATE enc.tf_state_versions SET data = (SELECT data FROM enc.tf_state_versions WHERE workspace = 'a' AND n = 1) WHERE workspace = 'b' AND n = 1`)
	_, _, err = b.svc.VersionGet(ctx, "enc", "b", 1)
	requireKind(t, err, fault.KindInternal)

	_, err = s.Exec(ctx, pqRaw(`UPDATE enc.states SET data = $1 WHERE name = 'a'`), string(secretState(5, "la", "plain")))
	require.Error(t, err, "plaintext into an encrypted project is refused")
	require.Contains(t, err.Error(), "is encrypted")
	_, err = s.Exec(ctx, pqRaw(`INSERT INTO enc.states (name, data) VALUES ('c', $1)`), string(secretState(1, "lc", "plain")))
	require.Error(t, err)
}

// TestEncryptionWithoutKey: a server without a key refuses to create or convert an
// encrypted project, and to read or write one, with a 409 that names the flag.
func TestEncryptionWithoutKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keyed := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, testKey(t))}})
	bare := setupOn(t, keyed.url, setupOpts{noKeeper: true})

	_, _, err := bare.svc.ProjectCreate(ctx, bare.actor, "enc", ProjectOptions{Encryption: true})
	fe := requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Error(), "--encryption-key-file")
	bare.project(t, "plain")
	_, err = bare.svc.ProjectEncrypt(ctx, bare.actor, "plain", 0)
	fe = requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Error(), "--encryption-key-file")

	_, _, err = keyed.svc.ProjectCreate(ctx, keyed.actor, "enc", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	_, err = keyed.svc.StateWrite(ctx, keyed.actor, "enc", "default", WriteRequest{Body: stateJSON(1, "l", 0)})
	require.NoError(t, err)
	_, err = bare.svc.StateGet(ctx, "enc", "default")
	fe = requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Error(), "--encryption-key-file")
	_, err = bare.svc.StateWrite(ctx, bare.actor, "enc", "default", WriteRequest{Body: stateJSON(2, "l", 0)})
	requireKind(t, err, fault.KindConflict)
	_, err = bare.svc.Lock(ctx, bare.actor, "enc", "new", lockBody("L"))
	requireKind(t, err, fault.KindConflict)

	// A server with another key names the key it lacks (503: another replica may have it).
	other := setupOn(t, keyed.url, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, testKey(t))}})
	_, err = other.svc.StateGet(ctx, "enc", "default")
	fe = requireKind(t, err, fault.KindUnavailable)
	require.ErrorIs(t, fe, secret.ErrMissingKey)
}

// TestProjectCredentialsRefusedWhenEncrypted: the pg backend would read ciphertext, so an
// encrypted project has no pg credentials (409 saying why).
func TestProjectCredentialsRefusedWhenEncrypted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, testKey(t))}})
	_, _, err := b.svc.ProjectCreate(ctx, b.actor, "enc", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	_, err = b.svc.ProjectCredentials(ctx, b.actor, "enc")
	fe := requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Error(), "encrypted")
	require.Contains(t, fe.Error(), "pg backend")
}

// TestProjectEncryptConverts: converting an existing project in batches seals every state
// and version (history keeps its serials, lineages and MD5s), serves the same plaintext afterwards, and refuses (423) while a workspace is
// locked, by an HTTP lock or by a pg client holding its key.
func TestProjectEncryptConverts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{opts: Options{Keys: testKeyring(t, testKey(t))}})
	b.project(t, "conv")
	for i, ws := range []string{"a", "b", "c"} {
		for serial := int64(1); serial <= 3; serial++ {
			_, err := b.svc.StateWrite(ctx, b.actor, "conv", ws, WriteRequest{Body: secretState(serial, "l-"+ws, fmt.Sprintf("plain-%d-%d", i, serial))})
			require.NoError(t, err)
		}
	}
	before, err := b.svc.VersionList(ctx, "conv", "b")
	require.NoError(t, err)

	// An HTTP lock refuses the conversion; nothing changes.
	_, err = b.svc.Lock(ctx, b.actor, "conv", "a", lockBody("LA"))
	require.NoError(t, err)
	_, err = b.svc.ProjectEncrypt(ctx, b.actor, "conv", 2)
	requireLocked(t, err)
	p, err := b.svc.ProjectGet(ctx, "conv")
	require.NoError(t, err)
	require.False(t, p.Encryption)
	require.NoError(t, b.svc.Unlock(ctx, b.actor, "conv", "a", UnlockRequest{ID: "LA"}))

	// So does a pg client holding a workspace's key, taken as the pg backend takes it: through
	// the states table (on Citus that runs on the worker holding the project).
	pg := rawSession(t, b.url)
	require.True(t, rawBool(t, pg, `SELECT pg_try_advisory_lock(id) FROM conv.states WHERE name = 'c'`))
	_, err = b.svc.ProjectEncrypt(ctx, b.actor, "conv", 2)
	requireLocked(t, err)
	require.True(t, rawBool(t, pg, `SELECT pg_advisory_unlock(id) FROM conv.states WHERE name = 'c'`))

	calls := 0
	var last api.ProjectEncryption
	for {
		last, err = b.svc.ProjectEncrypt(ctx, b.actor, "conv", 2)
		require.NoError(t, err)
		calls++
		if last.Done {
			break
		}
		require.Equal(t, 2, last.Converted)
		require.Less(t, calls, 20)
	}
	require.Equal(t, int64(0), last.Remaining)
	require.GreaterOrEqual(t, calls, 6, "3 states and 9 versions in batches of 2")
	again, err := b.svc.ProjectEncrypt(ctx, b.actor, "conv", 2)
	require.NoError(t, err)
	require.True(t, again.Done)
	require.Zero(t, again.Converted)

	s := rawSession(t, b.url)
	require.False(t, rawBool(t, s, `SELECT bool_or(data LIKE '%plain-%' OR NOT starts_with(data, 'strata:sv1:')) FROM conv.states`))
	require.False(t, rawBool(t, s, `SELECT bool_or(data LIKE '%plain-%' OR NOT starts_with(data, 'strata:sv1:')) FROM conv.tf_state_versions`))
	after, err := b.svc.VersionList(ctx, "conv", "b")
	require.NoError(t, err)
	require.Equal(t, before, after, "the conversion records no version and keeps the history's metadata")
	st, err := b.svc.StateGet(ctx, "conv", "b")
	require.NoError(t, err)
	require.Equal(t, string(secretState(3, "l-b", "plain-1-3")), string(st.Data))
	_, data, err := b.svc.VersionGet(ctx, "conv", "b", 1)
	require.NoError(t, err)
	require.Equal(t, string(secretState(1, "l-b", "plain-1-1")), string(data))
	ws, _, err := b.svc.WorkspaceList(ctx, "conv", WorkspaceListOptions{})
	require.NoError(t, err)
	require.Len(t, ws, 3)
	require.Equal(t, "a", ws[0].Name)
	require.Equal(t, int64(3), *ws[0].Serial, "listings still read serials from the versions")
	p, err = b.svc.ProjectGet(ctx, "conv")
	require.NoError(t, err)
	require.True(t, p.Encryption)
	require.Equal(t, 3, p.Workspaces)

	// Writes go on, sealed.
	_, err = b.svc.StateWrite(ctx, b.actor, "conv", "a", WriteRequest{Body: secretState(4, "l-a", "plain-after")})
	require.NoError(t, err)
	require.NotContains(t, storedData(t, b, "conv", "a"), "plain-after")
}

// TestRewrapBatchAndSealedByKey: with a new primary key, RewrapBatch moves every sealed state
// and version to it in batches (0 when done), SealedByKey counts them per key id, and the old
// key can then be retired.
func TestRewrapBatchAndSealedByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k1, k2 := testKey(t), testKey(t)
	old := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, k1)}})
	_, _, err := old.svc.ProjectCreate(ctx, old.actor, "e1", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	_, _, err = old.svc.ProjectCreate(ctx, old.actor, "e2", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	old.project(t, "plain")
	for _, p := range []string{"e1", "e2", "plain"} {
		for serial := int64(1); serial <= 2; serial++ {
			_, err := old.svc.StateWrite(ctx, old.actor, p, "w", WriteRequest{Body: secretState(serial, "l", "v")})
			require.NoError(t, err)
		}
	}
	counts, err := old.svc.SealedByKey(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{k1.ID: 6}, counts, "2 states and 4 versions; the plain project counts nothing")
	n, err := old.svc.RewrapBatch(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "everything is under the primary already")

	both := setupOn(t, old.url, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, k2, k1)}})
	total := 0
	for {
		n, err := both.svc.RewrapBatch(ctx, 4)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 4)
		if n == 0 {
			break
		}
		total += n
		counts, err := both.svc.SealedByKey(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(total), counts[k2.ID])
	}
	require.Equal(t, 6, total)
	counts, err = both.svc.SealedByKey(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{k2.ID: 6}, counts)
	vs, err := both.svc.VersionList(ctx, "e1", "w")
	require.NoError(t, err)
	require.Len(t, vs, 2, "re-wrapping records no version")

	newOnly := setupOn(t, old.url, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, k2)}})
	st, err := newOnly.svc.StateGet(ctx, "e2", "w")
	require.NoError(t, err)
	require.Equal(t, string(secretState(2, "l", "v")), string(st.Data))
	_, data, err := newOnly.svc.VersionGet(ctx, "e1", "w", 1)
	require.NoError(t, err)
	require.Equal(t, string(secretState(1, "l", "v")), string(data))
	_, err = old.svc.StateGet(ctx, "e1", "w")
	requireKind(t, err, fault.KindUnavailable)
}

// TestPGDumpHoldsNoPlaintext: a pg_dump of the whole database, after an encrypted project's
// state was written (with its versions, outputs and a resource attribute holding a
// distinctive value), contains none of the plaintext values; the same steps on an
// unencrypted project find the value in the dump, which shows the check can fail.
func TestPGDumpHoldsNoPlaintext(t *testing.T) {
	t.Parallel()
	bindir, err := pgembed.FindBinaries()
	require.NoError(t, err)
	pgDump := filepath.Join(bindir, "pg_dump")
	for _, encrypted := range []bool{true, false} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, testKey(t))}})
			_, _, err := b.svc.ProjectCreate(ctx, b.actor, "net", ProjectOptions{Encryption: encrypted})
			require.NoError(t, err)
			value := "zebra-" + randName("")
			lineage := "lineage-" + randName("")
			for serial := int64(1); serial <= 2; serial++ {
				_, err := b.svc.StateWrite(ctx, b.actor, "net", "default", WriteRequest{Body: secretState(serial, lineage, fmt.Sprintf("%s-%d", value, serial))})
				require.NoError(t, err)
			}
			_, err = b.svc.VersionRestore(ctx, b.actor, "net", "default", 1, "")
			require.NoError(t, err)
			dump, err := exec.Command(pgDump, "--dbname", b.url).Output()
			require.NoError(t, err)
			if encrypted {
				require.NotContains(t, string(dump), value)
				require.NotContains(t, string(dump), "terraform_data")
				require.Contains(t, string(dump), SealedPrefix, "the dump holds the sealed states")
			} else {
				require.Contains(t, string(dump), value, "control: the plain project's value is in the dump")
			}
		})
	}
}

// TestAdoptEncrypted: adopting an existing pg backend schema with encryption seals its rows
// and the versions made of them at adoption, in the adopting transaction.
func TestAdoptEncrypted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{noKeeper: true, opts: Options{Keys: testKeyring(t, testKey(t))}})
	pg := rawSession(t, b.url)
	rawExec(t, pg, `CREATE SEQUENCE IF NOT EXISTS public.global_states_id_seq AS bigint`)
	rawExec(t, pg, `CREATE SCHEMA legacy`)
	rawExec(t, pg, `CREATE TABLE legacy.states (id bigint NOT NULL DEFAULT nextval('public.global_states_id_seq') PRIMARY KEY, name text UNIQUE, data text)`)
	rawExec(t, pg, `INSERT INTO legacy.states (name, data) VALUES ('default', $1)`, string(secretState(7, "l-legacy", "adopted-secret")))
	p, created, err := b.svc.ProjectCreate(ctx, b.actor, "legacy", ProjectOptions{Encryption: true})
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, p.Adopted)
	require.True(t, p.Encryption)
	require.False(t, rawBool(t, pg, `SELECT bool_or(data LIKE '%adopted-secret%') FROM legacy.states`))
	require.False(t, rawBool(t, pg, `SELECT bool_or(data LIKE '%adopted-secret%') FROM legacy.tf_state_versions`))
	st, err := b.svc.StateGet(ctx, "legacy", "default")
	require.NoError(t, err)
	require.Equal(t, string(secretState(7, "l-legacy", "adopted-secret")), string(st.Data))
	vs, err := b.svc.VersionList(ctx, "legacy", "default")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	require.Equal(t, "adopt", vs[0].Source)
	require.Equal(t, int64(7), *vs[0].Serial)
}
