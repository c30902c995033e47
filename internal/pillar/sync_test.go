package pillar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// emptyTyped is an installation wired as the server wires it, with nothing in it.
func emptyTyped(t *testing.T) *typed {
	t.Helper()
	d := pgtest.NewDB(t)
	b := &typed{bundle: &bundle{db: d, res: resource.NewService(d), svc: pillar.NewService(d)}, kinds: kind.NewService(d)}
	b.res.UseSchemas(b.kinds)
	b.svc.UseKinds(b.kinds)
	b.kinds.SetHolder(b.svc)
	require.NoError(t, b.kinds.EnsureBuiltin(context.Background()))
	return b
}

func syncStream(t *testing.T, b *typed) []pillar.SyncRecord {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, b.svc.SyncExport(context.Background(), pillar.ExportOptions{}, &buf))
	recs, err := pillar.ReadSync(&buf)
	require.NoError(t, err)
	return recs
}

func actions(rep pillar.SyncReport) map[string]string {
	out := map[string]string{}
	for _, it := range rep.Items {
		out[it.Type+" "+it.Name] = it.Action
	}
	return out
}

// TestSyncBetweenInstallations (issue 19, item 4): installation A's pillars — a typed
// category bound to a kind, nodes with labels, a selector group, rows with history — are
// carried to an empty installation B by the ndjson stream. A dry run answers the plan and
// changes nothing; the sync gives B the same rows, renders, binding, kind and history; a
// second sync changes nothing; a change in A syncs as one updated row with its history entry.
func TestSyncBetweenInstallations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setupTyped(t)
	_, err := a.register(t, `{"type":"object","properties":{"servers":{"type":"array","items":{"type":"string"}},"iburst":{"type":"boolean","default":true}}}`)
	require.NoError(t, err)
	_, _, err = a.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	require.NoError(t, err)
	_, err = a.res.Patch(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, []byte(`{"metadata":{"labels":{"role":"web"}}}`))
	require.NoError(t, err)
	a.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{Spec: json.RawMessage(`{"selector":"role=web","priority":3}`)})
	for _, v := range []string{`{"servers":["a"]}`, `{"servers":["a","b"]}`} {
		_, _, err = a.svc.Put(ctx, pillar.Global, "ntp", obj(t, v), "", "alice")
		require.NoError(t, err)
	}
	_, _, err = a.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "app", obj(t, `{"port":8080,"price":1.50}`), "", "bob")
	require.NoError(t, err)
	_, _, err = a.svc.Put(ctx, web02, "app", obj(t, `{"port":9090}`), "", "bob")
	require.NoError(t, err)

	recs := syncStream(t, a)
	b := emptyTyped(t)
	admin := auth.AuditActor{Actor: "sync"}
	dry, err := b.svc.SyncImport(ctx, b.res, recs, true, admin)
	require.NoError(t, err)
	require.False(t, dry.Applied)
	require.Equal(t, "created", actions(dry)["kind NtpFormula"])
	require.Equal(t, "created", actions(dry)["row global/ntp"])
	require.Empty(t, rowsOf(t, b.bundle), "a dry run changes nothing")
	_, err = b.kinds.Get(ctx, "NtpFormula")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err), "a dry run registers no kind")

	rep, err := b.svc.SyncImport(ctx, b.res, recs, false, admin)
	require.NoError(t, err)
	require.True(t, rep.Applied)
	require.Equal(t, rowsOf(t, a.bundle), rowsOf(t, b.bundle))
	for _, n := range []string{"web01", "web02"} {
		ra, err := a.svc.Render(ctx, a.res, n, false)
		require.NoError(t, err)
		rb, err := b.svc.Render(ctx, b.res, n, false)
		require.NoError(t, err)
		require.JSONEq(t, string(ra.JSON), string(rb.JSON), n)
	}
	c, err := b.svc.GetCategory(ctx, "ntp")
	require.NoError(t, err)
	require.Equal(t, "NtpFormula", c.Kind)
	_, _, err = b.svc.Put(ctx, pillar.Global, "ntp", obj(t, `{"servers":"x"}`), "", "t")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err), "the binding is enforced in B")
	hist, err := b.svc.History(ctx, pillar.Global, "ntp", 0, 100)
	require.NoError(t, err)
	var actors []string
	for _, h := range hist {
		actors = append(actors, h.Actor)
	}
	require.Equal(t, []string{"sync", "alice", "alice"}, actors, "A's history, then B's own write")

	// Idempotent: nothing changes the second time, no history entry is added twice.
	again, err := b.svc.SyncImport(ctx, b.res, syncStream(t, a), false, admin)
	require.NoError(t, err)
	for _, it := range again.Items {
		require.Equal(t, "unchanged", it.Action, it)
		require.Zero(t, it.History, it)
	}

	// A change in A: one row updated, with A's new history entry.
	_, _, err = a.svc.Put(ctx, web02, "app", obj(t, `{"port":9091}`), "", "carol")
	require.NoError(t, err)
	third, err := b.svc.SyncImport(ctx, b.res, syncStream(t, a), false, admin)
	require.NoError(t, err)
	changed := 0
	for _, it := range third.Items {
		if it.Action != "unchanged" {
			changed++
			require.Equal(t, "row node/web02/app", it.Type+" "+it.Name)
			require.Equal(t, "updated", it.Action)
			require.Equal(t, 1, it.History)
		}
	}
	require.Equal(t, 1, changed)
	require.Equal(t, rowsOf(t, a.bundle), rowsOf(t, b.bundle))
}

// TestSyncStreamErrors: a stream without its header, a record of an unknown type or missing
// what its type needs, and a line that is not JSON are 400s naming the line.
func TestSyncStreamErrors(t *testing.T) {
	t.Parallel()
	for name, stream := range map[string]string{
		"no header":    `{"type":"org","name":"acme"}`,
		"unknown type": `{"type":"header","version":1}` + "\n" + `{"type":"wat"}`,
		"no data":      `{"type":"header","version":1}` + "\n" + `{"type":"row","target":"global","category":"app"}`,
		"bad target":   `{"type":"header","version":1}` + "\n" + `{"type":"row","target":"planet/x","category":"app","data":{}}`,
		"not json":     `{"type":"header","version":1}` + "\n" + `{nope`,
		"unknown key":  `{"type":"header","version":1}` + "\n" + `{"type":"org","name":"a","bogus":1}`,
		"empty":        "",
	} {
		_, err := pillar.ReadSync(strings.NewReader(stream))
		require.Equal(t, fault.KindInvalid, fault.KindOf(err), "%s: %v", name, err)
	}
}
