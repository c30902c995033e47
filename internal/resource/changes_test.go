package resource_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// changeQueries reads the changes table, which the package itself only writes (watch, which
// will read it, is a later capability).
var changeQueries = db.MustParseQueries(fstest.MapFS{"changes.sql": {Data: []byte(`
-- name: TestChangesOf
SELECT resource_version, type, kind, org, name, object
FROM {{schema}}.changes
WHERE kind = $1 AND org = $2 AND name = $3
ORDER BY resource_version;
`)}}, "changes.sql")

// change is one row of the changes table.
type change struct {
	RV     int64
	Type   string
	Kind   string
	Org    string
	Name   string
	Object api.Object
}

func changesOf(t *testing.T, d *db.DB, kind, org, name string) []change {
	t.Helper()
	rows, err := d.Query(context.Background(), changeQueries.Get("TestChangesOf"), kind, org, name)
	require.NoError(t, err)
	defer rows.Close()
	var out []change
	for rows.Next() {
		var c change
		var obj []byte
		require.NoError(t, rows.Scan(&c.RV, &c.Type, &c.Kind, &c.Org, &c.Name, &obj))
		require.NoError(t, json.Unmarshal(obj, &c.Object), string(obj))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireChange asserts that c records a change of type typ to want: the row's kind and
// name, and the object's kind, name, labels, annotations and spec. withRV also requires the
// row's resource_version and the object's to be want's.
func requireChange(t *testing.T, c change, typ string, want api.Object, withRV bool) {
	t.Helper()
	require.Equal(t, typ, c.Type)
	require.Equal(t, want.Kind, c.Kind)
	require.Equal(t, want.Metadata.Org, c.Org)
	require.Equal(t, want.Metadata.Name, c.Name)
	require.Equal(t, want.Kind, c.Object.Kind)
	require.Equal(t, want.Metadata.Name, c.Object.Metadata.Name)
	require.Equal(t, want.Metadata.Labels, c.Object.Metadata.Labels)
	require.Equal(t, want.Metadata.Annotations, c.Object.Metadata.Annotations)
	require.JSONEq(t, string(want.Spec), string(c.Object.Spec))
	if withRV {
		require.Equal(t, want.Metadata.ResourceVersion, strconv.FormatInt(c.RV, 10))
		require.Equal(t, want.Metadata.ResourceVersion, c.Object.Metadata.ResourceVersion)
	}
}

// TestChangesRecordEachWrite: every committed write appends one row to changes, with the
// write's resourceVersion and the object as it is after the write: ADDED for a create,
// MODIFIED for a PATCH (the merged object, not the one before it) and for a PUT, and DELETED
// for a delete, carrying the object as it was just before. A write refused by its
// precondition appends nothing.
func TestChangesRecordEachWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	created, err := b.svc.Create(ctx, org("acme"), api.Object{
		Metadata: api.ObjectMeta{Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"note": "first"}},
		Spec:     json.RawMessage(`{"a": 1, "big": 12345678901234567890123}`),
	})
	require.NoError(t, err)
	cs := changesOf(t, b.db, "Org", "", "acme")
	require.Len(t, cs, 1)
	requireChange(t, cs[0], "ADDED", created, true)

	patched, err := b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"env":null,"tier":"gold"},"annotations":{"note":"patched"}},"spec":{"b":2}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tier": "gold"}, patched.Metadata.Labels)
	cs = changesOf(t, b.db, "Org", "", "acme")
	require.Len(t, cs, 2)
	requireChange(t, cs[1], "MODIFIED", patched, true)
	require.JSONEq(t, `{"a": 1, "b": 2, "big": 12345678901234567890123}`, string(cs[1].Object.Spec))

	repl := patched
	repl.Metadata.Labels = map[string]string{"tier": "silver"}
	repl.Metadata.Annotations = map[string]string{}
	repl.Spec = json.RawMessage(`{"c": [3]}`)
	replaced, err := b.svc.Replace(ctx, org("acme"), repl)
	require.NoError(t, err)
	cs = changesOf(t, b.db, "Org", "", "acme")
	require.Len(t, cs, 3)
	requireChange(t, cs[2], "MODIFIED", replaced, true)

	// Refused writes record nothing.
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"resourceVersion":"`+created.Metadata.ResourceVersion+`"},"spec":{"d":4}}`))
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
	require.Equal(t, fault.KindConflict, fault.KindOf(b.svc.Delete(ctx, org("acme"), patched.Metadata.ResourceVersion, false)))
	require.Len(t, changesOf(t, b.db, "Org", "", "acme"), 3)

	require.NoError(t, b.svc.Delete(ctx, org("acme"), replaced.Metadata.ResourceVersion, false))
	cs = changesOf(t, b.db, "Org", "", "acme")
	require.Len(t, cs, 4)
	requireChange(t, cs[3], "DELETED", replaced, false)
	require.Greater(t, cs[3].RV, cs[2].RV, "the deletion has a resourceVersion of its own")

	for i := 1; i < len(cs); i++ {
		require.Greater(t, cs[i].RV, cs[i-1].RV, "one object's versions increase in commit order (its row lock orders its writers)")
	}
}
