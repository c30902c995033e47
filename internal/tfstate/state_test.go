package tfstate

import (
	"context"
	"crypto/md5"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

func TestStateWriteRules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	b.project(t, "p")
	write := func(body []byte) (WriteResult, error) {
		return b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: body})
	}

	_, err := b.svc.StateGet(ctx, "p", "default")
	requireKind(t, err, fault.KindNotFound)

	// The first write creates the workspace.
	res, err := write(stateJSON(3, "lin-a", 1))
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Version)
	require.False(t, res.Unchanged)

	// Same bytes again: a retry, 200, no new version.
	res, err = write(stateJSON(3, "lin-a", 1))
	require.NoError(t, err)
	require.True(t, res.Unchanged)
	require.Equal(t, int64(1), res.Version)

	// Lower serial, same lineage: stale.
	_, err = write(stateJSON(2, "lin-a", 1))
	requireKind(t, err, fault.KindConflict)

	// Same serial, other bytes: stale too (Terraform raises the serial with every change it
	// persists; this is a second writer that started from the same state).
	_, err = write([]byte(strings.Replace(string(stateJSON(3, "lin-a", 1)), "1.11.4", "1.11.5", 1)))
	requireKind(t, err, fault.KindConflict)

	// Another lineage over a state that has resources: refused.
	_, err = write(stateJSON(9, "lin-b", 0))
	fe := requireKind(t, err, fault.KindConflict)
	require.Contains(t, fe.Detail, "lineage")

	// Higher serial: fine; then the resources go (destroy) ...
	_, err = write(stateJSON(4, "lin-a", 0))
	require.NoError(t, err)
	// ... and a state without resources may be replaced under any lineage, with any serial
	// (init -migrate-state pushes the source's state, serial and all).
	_, err = write(stateJSON(1, "lin-b", 1))
	require.NoError(t, err)

	// OpenTofu's client-side encrypted payloads have no readable serial or lineage: stored as
	// they come, whatever is stored before or after.
	enc := []byte(`{"meta":{"key_provider.pbkdf2.mykey":"eyJzYWx0IjoiIn0="},"encrypted_data":"c2VjcmV0","encryption_version":"v0"}`)
	_, err = write(enc)
	require.NoError(t, err)
	st, err := b.svc.StateGet(ctx, "p", "default")
	require.NoError(t, err)
	require.Equal(t, enc, st.Data)
	require.Equal(t, md5.Sum(enc), st.MD5)
	_, err = write(stateJSON(1, "lin-c", 1))
	require.NoError(t, err)

	vs, err := b.svc.VersionList(ctx, "p", "default")
	require.NoError(t, err)
	require.Len(t, vs, 5)
	require.Equal(t, int64(5), vs[0].N)
	require.Equal(t, "http", vs[0].Source)
	require.Equal(t, "alice", vs[0].CreatedBy)
	require.Nil(t, vs[1].Serial, "the encrypted version has no serial")
	require.Equal(t, int64(3), *vs[4].Serial)
	require.Equal(t, "lin-a", vs[4].Lineage)
}

func TestStateWriteChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true, opts: Options{MaxStateBytes: 1000}})
	ctx := context.Background()
	b.project(t, "p")
	body := stateJSON(1, "l", 0)
	sum := md5.Sum(body)

	_, err := b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: body, ContentMD5: sum[:]})
	require.NoError(t, err)
	bad := md5.Sum([]byte("other"))
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: stateJSON(2, "l", 0), ContentMD5: bad[:]})
	fe := requireKind(t, err, fault.KindInvalid)
	require.Equal(t, "/Content-MD5", fe.Fields[0].Field)

	_, err = b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: []byte(strings.Repeat(" ", 1001))})
	requireKind(t, err, fault.KindTooLarge)
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: []byte("  ")})
	requireKind(t, err, fault.KindInvalid)
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: []byte("{\"a\":\"\x00\"}")})
	requireKind(t, err, fault.KindInvalid)

	_, err = b.svc.StateWrite(ctx, b.actor, "nope", "w", WriteRequest{Body: body})
	requireKind(t, err, fault.KindNotFound)
	_, err = b.svc.StateWrite(ctx, b.actor, "p", "a/b", WriteRequest{Body: body})
	requireKind(t, err, fault.KindInvalid)

	st, err := b.svc.StateGet(ctx, "p", "w")
	require.NoError(t, err)
	require.Equal(t, sum, st.MD5)

	require.NoError(t, b.svc.StateDelete(ctx, b.actor, "p", "w", ""))
	_, err = b.svc.StateGet(ctx, "p", "w")
	requireKind(t, err, fault.KindNotFound)
	// Versions outlive the workspace, so it can be restored.
	vs, err := b.svc.VersionList(ctx, "p", "w")
	require.NoError(t, err)
	require.Len(t, vs, 1)
	_, err = b.svc.VersionRestore(ctx, b.actor, "p", "w", 1, "")
	require.NoError(t, err)
	st, err = b.svc.StateGet(ctx, "p", "w")
	require.NoError(t, err)
	require.Equal(t, int64(2), parseState(st.Data).Serial)
}

// TestVersionsOfDirectWrites: writes made by pg clients, straight into the states table,
// become versions too (through the SECURITY DEFINER trigger), named by their role.
func TestVersionsOfDirectWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true})
	ctx := context.Background()
	b.project(t, "proj_a")
	pg := rawSession(t, b.url)
	// The pg backend's own upsert, verbatim.
	upsert := `INSERT INTO "proj_a"."states" (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = $2 WHERE "states".name = $1`
	one, two := stateJSON(1, "lin", 1), stateJSON(2, "lin", 1)
	rawExec(t, pg, upsert, "default", string(one))
	rawExec(t, pg, upsert, "default", string(two))
	rawExec(t, pg, upsert, "default", string(two)) // no change, no version

	vs, err := b.svc.VersionList(ctx, "proj_a", "default")
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, "pg", vs[0].Source)
	require.True(t, strings.HasPrefix(vs[0].CreatedBy, "pg:"), vs[0].CreatedBy)
	require.Equal(t, int64(2), *vs[0].Serial)
	sum := md5.Sum(two)
	require.Equal(t, hexString(sum[:]), vs[0].MD5)
	require.Equal(t, int64(len(two)), vs[0].Size)

	v, data, err := b.svc.VersionGet(ctx, "proj_a", "default", 1)
	require.NoError(t, err)
	require.Equal(t, one, data)
	require.Equal(t, int64(1), v.N)
	_, _, err = b.svc.VersionGet(ctx, "proj_a", "default", 9)
	requireKind(t, err, fault.KindNotFound)

	// Restore version 1: its bytes come back with a serial above the current one, as a new
	// version; its lineage is kept.
	res, err := b.svc.VersionRestore(ctx, b.actor, "proj_a", "default", 1, "")
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Version)
	st, err := b.svc.StateGet(ctx, "proj_a", "default")
	require.NoError(t, err)
	require.Equal(t, strings.Replace(string(one), `"serial": 1`, `"serial": 3`, 1), string(st.Data))
	vs, err = b.svc.VersionList(ctx, "proj_a", "default")
	require.NoError(t, err)
	require.Equal(t, "restore", vs[0].Source)
	require.Equal(t, "alice", vs[0].CreatedBy)
}

func TestVersionRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true, opts: Options{KeepVersions: 3}})
	ctx := context.Background()
	b.project(t, "p")
	for i := int64(1); i <= 6; i++ {
		_, err := b.svc.StateWrite(ctx, b.actor, "p", "default", WriteRequest{Body: stateJSON(i, "l", 1)})
		require.NoError(t, err)
	}
	vs, err := b.svc.VersionList(ctx, "p", "default")
	require.NoError(t, err)
	require.Len(t, vs, 3)
	require.Equal(t, []int64{6, 5, 4}, []int64{vs[0].N, vs[1].N, vs[2].N})

	// pg clients' writes are pruned by the sweep.
	pg := rawSession(t, b.url)
	for i := int64(7); i <= 9; i++ {
		rawExec(t, pg, `UPDATE "p"."states" SET data = $1 WHERE name = 'default'`, string(stateJSON(i, "l", 1)))
	}
	vs, err = b.svc.VersionList(ctx, "p", "default")
	require.NoError(t, err)
	require.Len(t, vs, 6)
	n, err := b.svc.PruneVersions(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	vs, err = b.svc.VersionList(ctx, "p", "default")
	require.NoError(t, err)
	require.Equal(t, []int64{9, 8, 7}, []int64{vs[0].N, vs[1].N, vs[2].N})
}

// TestRetentionSweep: writes made by pg clients straight into the states table are pruned to
// KeepVersions by the background sweep that Start runs.
func TestRetentionSweep(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{noKeeper: true, opts: Options{KeepVersions: 2, PruneInterval: 50 * time.Millisecond}})
	ctx := context.Background()
	b.project(t, "p")
	pg := rawSession(t, b.url)
	for serial := int64(1); serial <= 5; serial++ {
		rawExec(t, pg, `INSERT INTO p.states (name, data) VALUES ('default', $1) ON CONFLICT (name) DO UPDATE SET data = $1`, string(stateJSON(serial, "l", 1)))
	}
	require.Eventually(t, func() bool {
		vs, err := b.svc.VersionList(ctx, "p", "default")
		return err == nil && len(vs) == 2 && *vs[0].Serial == 5
	}, 15*time.Second, 50*time.Millisecond, "the sweep keeps the newest 2 versions")
}
