package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/client"
)

// TestPatchRefusesUnknownMembers is finding 6 of issue 15: `{"metdata": …}` answered 200,
// applied nothing and drew a new resourceVersion. Unknown top-level and metadata members
// are a 400 naming each, as PUT refuses them, and nothing is written. Seen failing before
// the fix (200).
func TestPatchRefusesUnknownMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	raw := &testBundle{srv: b.srv, admin: b.secret, tokens: b.tokens}
	org, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "acme", Labels: map[string]string{"env": "prod"}}})
	require.NoError(t, err)
	_, err = b.admin.Nodes().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "web01"}, Spec: json.RawMessage(`{"org":"acme"}`)})
	require.NoError(t, err)

	for _, tc := range []struct {
		path, body string
		fields     []string
	}{
		{"/v1/orgs/acme", `{"metdata":{"labels":{"env":"dev"}}}`, []string{"/metdata"}},
		{"/v1/orgs/acme", `{"metadata":{"lables":{"env":"dev"},"labels":{"env":"dev"}}}`, []string{"/metadata/lables"}},
		{"/v1/orgs/acme", `{"sepc":{},"stauts":{},"metadata":{"uuid":"x","a/b~c":1}}`, []string{"/sepc", "/stauts", "/metadata/a~1b~0c", "/metadata/uuid"}},
		{"/v1/nodes/web01", `{"metadata":{"annotation":{"a":"b"}}}`, []string{"/metadata/annotation"}},
	} {
		r := raw.do(t, "PATCH", tc.path, b.secret, strings.NewReader(tc.body), "Content-Type", "application/merge-patch+json")
		p := problem(t, r, 400, "validation")
		var got []string
		for _, e := range p.Errors {
			require.Equal(t, "unknown field", e.Message)
			got = append(got, e.Field)
		}
		require.ElementsMatch(t, tc.fields, got, tc.body)
		for _, f := range tc.fields {
			require.Contains(t, p.Detail, f)
		}
	}
	after, err := b.admin.Orgs().Get(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, org.Metadata.ResourceVersion, after.Metadata.ResourceVersion, "a refused patch writes nothing")
	require.Equal(t, map[string]string{"env": "prod"}, after.Metadata.Labels)
}

// TestNoOpWriteIsNoChange is finding 6 of issue 15: an empty PATCH `{}` drew a new
// resourceVersion and sent MODIFIED to every watcher. A PATCH or PUT that changes nothing
// answers 200 with the stored object and its version, and no watcher hears of it: the first
// event after them is the next real change. Seen failing before the fix (new version, event).
func TestNoOpWriteIsNoChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	raw := &testBundle{srv: b.srv, admin: b.secret, tokens: b.tokens}
	orgs, nodes := b.admin.Orgs(), b.admin.Nodes()
	_, err := orgs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "acme", Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"owner": "ops"}}})
	require.NoError(t, err)
	_, err = nodes.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "web01", Labels: map[string]string{"role": "web"}}, Spec: json.RawMessage(`{"org":"acme"}`)})
	require.NoError(t, err)
	_, err = b.admin.KindApply(ctx, "Db", api.KindRequest{Scope: "org", Schema: json.RawMessage(
		`{"type":"object","properties":{"size":{"type":"integer"},"tier":{"type":"string","default":"standard"}}}`)}, false)
	require.NoError(t, err)
	dbs := b.admin.Objects("Db", "acme")
	_, err = dbs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "main"}, Spec: json.RawMessage(`{"size":1.0}`)})
	require.NoError(t, err)

	type target struct {
		path    string
		watch   *client.Resources
		get     func() (api.Object, error)
		noops   []string // PATCH bodies that change nothing
		putBody string   // a PUT of what is stored
		change  string   // a PATCH that does change something
	}
	targets := []target{
		{"/v1/orgs/acme", orgs, func() (api.Object, error) { return orgs.Get(ctx, "acme") },
			[]string{`{}`, `{"metadata":{"labels":{"env":"prod"}}}`, `{"metadata":{"labels":{"gone":null},"annotations":{"owner":"ops"}}}`, `{"kind":"Org","metadata":{"name":"acme"}}`},
			`{"metadata":{"name":"acme","labels":{"env":"prod"},"annotations":{"owner":"ops"}}}`,
			`{"metadata":{"labels":{"env":"dev"}}}`},
		{"/v1/nodes/web01", nodes, func() (api.Object, error) { return nodes.Get(ctx, "web01") },
			[]string{`{}`, `{"spec":{"org":"acme"}}`, `{"metadata":{"labels":{"role":"web"}}}`},
			`{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`,
			`{"metadata":{"labels":{"role":"db"}}}`},
		// The stored spec is {"size":1} (integers lose their fraction) with the default
		// filled in: sending either form is no change.
		{"/v1/orgs/acme/resources/Db/main", dbs, func() (api.Object, error) { return dbs.Get(ctx, "main") },
			[]string{`{}`, `{"spec":{"size":1}}`, `{"spec":{"size":1.0,"tier":"standard"}}`},
			`{"metadata":{"name":"main"},"spec":{"size":1,"tier":"standard"}}`,
			`{"spec":{"size":2}}`},
	}
	for _, tg := range targets {
		before, err := tg.get()
		require.NoError(t, err)
		w, err := tg.watch.Watch(ctx, client.WatchOptions{ResourceVersion: before.Metadata.ResourceVersion})
		require.NoError(t, err)
		for _, body := range tg.noops {
			r := raw.do(t, "PATCH", tg.path, b.secret, strings.NewReader(body), "Content-Type", "application/merge-patch+json")
			require.Equal(t, 200, r.status, "%s %s", body, r.body)
			var got api.Object
			require.NoError(t, json.Unmarshal(r.body, &got))
			require.Equal(t, before.Metadata.ResourceVersion, got.Metadata.ResourceVersion, "PATCH %s %s drew a new version", tg.path, body)
			require.Equal(t, before.Metadata.Labels, got.Metadata.Labels)
		}
		r := raw.do(t, "PUT", tg.path, b.secret, strings.NewReader(tg.putBody))
		require.Equal(t, 200, r.status, string(r.body))
		var got api.Object
		require.NoError(t, json.Unmarshal(r.body, &got))
		require.Equal(t, before.Metadata.ResourceVersion, got.Metadata.ResourceVersion, "PUT %s of the stored object drew a new version", tg.path)
		after, err := tg.get()
		require.NoError(t, err)
		require.Equal(t, before.Metadata.ResourceVersion, after.Metadata.ResourceVersion)
		require.Equal(t, before.Metadata.UpdatedAt, after.Metadata.UpdatedAt)

		// The control: a real change is written, and it is the first event the watcher gets.
		r = raw.do(t, "PATCH", tg.path, b.secret, strings.NewReader(tg.change), "Content-Type", "application/merge-patch+json")
		require.Equal(t, 200, r.status, string(r.body))
		require.NoError(t, json.Unmarshal(r.body, &got))
		require.NotEqual(t, before.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
		ev := next(t, w)
		require.Equal(t, api.EventModified, ev.Type)
		require.Equal(t, got.Metadata.ResourceVersion, ev.Object.Metadata.ResourceVersion, "%s: the first event is the real change", tg.path)
		w.Close()
	}
}
