package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type testBundle struct {
	db  *db.DB
	svc *resource.Service
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	d := pgtest.NewDB(t)
	return &testBundle{db: d, svc: resource.NewService(d)}
}

func org(name string) resource.Ref { return resource.Ref{Kind: resource.KindOrg, Name: name} }

func TestCreateGetListDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	created, err := b.svc.Create(ctx, org("acme"), api.Object{
		Metadata: api.ObjectMeta{Name: "acme", Labels: map[string]string{"env": "prod", "example.com/tier": "gold"},
			Annotations: map[string]string{"note": "hello world"}},
		Spec: json.RawMessage(`{"big": 12345678901234567890123, "f": 1.50}`),
	})
	require.NoError(t, err)
	require.Equal(t, "Org", created.Kind)
	require.Equal(t, map[string]string{"env": "prod", "example.com/tier": "gold"}, created.Metadata.Labels)
	require.Equal(t, "hello world", created.Metadata.Annotations["note"])
	require.JSONEq(t, `{"big": 12345678901234567890123, "f": 1.50}`, string(created.Spec))
	require.Contains(t, string(created.Spec), "12345678901234567890123", "large integers keep their digits")
	require.NotEmpty(t, created.Metadata.ResourceVersion)

	_, err = b.svc.Create(ctx, org("acme"), api.Object{})
	require.Equal(t, fault.KindConflict, fault.KindOf(err))

	for i := range 5 {
		_, err := b.svc.Create(ctx, org(fmt.Sprintf("org-%d", i)), api.Object{})
		require.NoError(t, err)
	}
	all := auth.Filter{All: true}
	page, last, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Limit: 4, Filter: all})
	require.NoError(t, err)
	require.Len(t, page.Items, 4)
	require.Equal(t, "acme", page.Items[0].Metadata.Name)
	require.Equal(t, "org-2", last)
	rest, last, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Limit: 4, After: last, Filter: all})
	require.NoError(t, err)
	require.Len(t, rest.Items, 2)
	require.Empty(t, last)
	require.Equal(t, "org-4", rest.Items[1].Metadata.Name)

	// The filter is applied before the limit: a page holds visible rows only, and a
	// filter letting nothing through lists nothing.
	some := auth.Filter{Names: []string{"org-3"}, Prefixes: []string{"org-1"}}
	page, last, err = b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Limit: 1, Filter: some})
	require.NoError(t, err)
	require.Equal(t, []string{"org-1"}, names(page))
	page, last, err = b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Limit: 1, After: last, Filter: some})
	require.NoError(t, err)
	require.Equal(t, []string{"org-3"}, names(page))
	require.Empty(t, last)
	page, _, err = b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, page.Items)

	require.NoError(t, b.svc.Delete(ctx, org("acme"), "", false))
	_, err = b.svc.Get(ctx, org("acme"))
	require.Equal(t, fault.KindNotFound, fault.KindOf(err))
	require.Equal(t, fault.KindNotFound, fault.KindOf(b.svc.Delete(ctx, org("acme"), "", false)))
}

func TestValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	cases := []struct {
		name  string
		obj   api.Object
		field string
	}{
		{"Bad_Name", api.Object{}, "/metadata/name"},
		{"ok", api.Object{Kind: "Node"}, "/kind"},
		{"ok", api.Object{Metadata: api.ObjectMeta{Labels: map[string]string{"Bad Key": "x"}}}, "/metadata/labels/Bad Key"},
		{"ok", api.Object{Metadata: api.ObjectMeta{Labels: map[string]string{"k": "bad value!"}}}, "/metadata/labels/k"},
		{"ok", api.Object{Metadata: api.ObjectMeta{Labels: map[string]string{"a/b/c": "x"}}}, "/metadata/labels/a~1b~1c"},
		{"ok", api.Object{Spec: json.RawMessage(`[1,2]`)}, "/spec"},
		{"ok", api.Object{Metadata: api.ObjectMeta{Name: "other"}}, "/metadata/name"},
		{"ok", api.Object{Spec: json.RawMessage(`{"a":{"b":["x","\u0000"]}}`)}, "/spec/a/b/1"},
		{"ok", api.Object{Metadata: api.ObjectMeta{Annotations: map[string]string{"n": "a\x00"}}}, "/metadata/annotations/n"},
	}
	for _, c := range cases {
		_, err := b.svc.Create(ctx, org(c.name), c.obj)
		var fe *fault.Error
		require.ErrorAs(t, err, &fe, c.field)
		want := fault.KindInvalid
		if strings.HasPrefix(c.field, "/metadata/labels") || strings.HasPrefix(c.field, "/metadata/annotations") {
			want = fault.KindUnprocessable // well-formed metadata that breaks the key rules
		}
		require.Equal(t, want, fe.Kind, c.field)
		require.Equal(t, c.field, fe.Fields[0].Field)
	}
}

func TestOptimisticConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v1, err := b.svc.Create(ctx, org("acme"), api.Object{Spec: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)

	upd := v1
	upd.Spec = json.RawMessage(`{"a":2}`)
	v2, err := b.svc.Replace(ctx, org("acme"), upd)
	require.NoError(t, err)
	require.NotEqual(t, v1.Metadata.ResourceVersion, v2.Metadata.ResourceVersion)

	// A writer still holding v1 is refused and loses nothing.
	stale := v1
	stale.Spec = json.RawMessage(`{"a":3}`)
	_, err = b.svc.Replace(ctx, org("acme"), stale)
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
	got, err := b.svc.Get(ctx, org("acme"))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":2}`, string(got.Spec))

	require.Equal(t, fault.KindConflict, fault.KindOf(b.svc.Delete(ctx, org("acme"), v1.Metadata.ResourceVersion, false)))
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"resourceVersion":"`+v1.Metadata.ResourceVersion+`"}}`))
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
}

func TestPatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{
		Metadata: api.ObjectMeta{Labels: map[string]string{"a": "1", "b": "2"}},
		Spec:     json.RawMessage(`{"x":{"y":1,"z":2},"keep":true}`),
	})
	require.NoError(t, err)
	got, err := b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"a":null,"c":"3"}},"spec":{"x":{"y":null,"n":99999999999999999999}}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"b": "2", "c": "3"}, got.Metadata.Labels)
	require.JSONEq(t, `{"x":{"z":2,"n":99999999999999999999},"keep":true}`, string(got.Spec))
	require.Contains(t, string(got.Spec), "99999999999999999999")

	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"metadata":{"labels":{"bad key":"x"}}}`))
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err))
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`not json`))
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))
	_, err = b.svc.Patch(ctx, org("acme"), []byte(`{"kind":"Node"}`))
	require.Equal(t, fault.KindInvalid, fault.KindOf(err))
}

// TestConcurrentPatchesCompose: concurrent label patches from many writers all land,
// because each runs under the row lock; none overwrites another's key.
func TestConcurrentPatchesCompose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Patch(ctx, org("acme"), []byte(fmt.Sprintf(`{"metadata":{"labels":{"k%d":"v"}}}`, i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := b.svc.Get(ctx, org("acme"))
	require.NoError(t, err)
	require.Len(t, got.Metadata.Labels, n)
}

func names(l api.ObjectList) []string {
	out := []string{}
	for _, o := range l.Items {
		out = append(out, o.Metadata.Name)
	}
	return out
}
