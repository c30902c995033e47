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

// TestUserKindOverHTTP: a user kind's objects go through the generic routes: created,
// listed with a selector, patched with the write pipeline's warnings in Warning headers,
// refused with 400/422 naming the field, and watched — the events presented through the
// kind's current revision (a default registered after the write is filled in).
func TestUserKindOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := watchSetup(t, time.Hour, time.Minute)
	raw := &testBundle{srv: b.srv, admin: b.secret, tokens: b.tokens}
	_, err := b.admin.Orgs().Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "acme"}})
	require.NoError(t, err)
	_, err = b.admin.KindApply(ctx, "Db", api.KindRequest{Scope: "org", Schema: json.RawMessage(
		`{"type":"object","properties":{"size":{"type":"integer","maximum":100},"old":{"type":"string","deprecated":true}}}`)}, false)
	require.NoError(t, err)
	dbs := b.admin.Objects("Db", "acme")
	list, err := dbs.List(ctx, client.ListOptions{})
	require.NoError(t, err)
	w, err := dbs.Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Close()

	created, err := dbs.Create(ctx, api.Object{Metadata: api.ObjectMeta{Name: "main", Labels: map[string]string{"env": "prod"}}, Spec: json.RawMessage(`{"size":80}`)})
	require.NoError(t, err)
	require.Equal(t, 1, created.Metadata.SchemaRevision)
	require.Equal(t, "ADDED main", eventOf(next(t, w)))

	// Deprecated field: accepted, with a Warning header.
	_, warnings, err := dbs.Put(ctx, api.Object{Kind: "Db", Metadata: api.ObjectMeta{Name: "main", Labels: map[string]string{"env": "prod"}}, Spec: json.RawMessage(`{"size":80,"old":"x"}`)})
	require.NoError(t, err)
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "deprecated")
	require.Equal(t, "MODIFIED main", eventOf(next(t, w)))

	// Unknown field → 400 naming it; constraint → 422 naming it.
	r := raw.do(t, "PATCH", "/v1/orgs/acme/resources/Db/main", b.secret, strings.NewReader(`{"spec":{"bogus":1}}`))
	p := problem(t, r, 400, "validation")
	require.Equal(t, "/spec/bogus", p.Errors[0].Field)
	r = raw.do(t, "PATCH", "/v1/orgs/acme/resources/Db/main", b.secret, strings.NewReader(`{"spec":{"size":101}}`))
	p = problem(t, r, 422, "unprocessable")
	require.Equal(t, "/spec/size", p.Errors[0].Field)

	// A new revision with a default: a watch resumed from before the change presents the
	// object with it; the list does too; nothing was rewritten.
	_, err = b.admin.KindApply(ctx, "Db", api.KindRequest{Schema: json.RawMessage(
		`{"type":"object","properties":{"size":{"type":"integer","maximum":100},"old":{"type":"string","deprecated":true},"tier":{"type":"string","default":"standard"}}}`)}, false)
	require.NoError(t, err)
	w2, err := dbs.Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w2.Close()
	ev := next(t, w2)
	require.Equal(t, "ADDED main", eventOf(ev))
	require.JSONEq(t, `{"size":80,"tier":"standard"}`, string(ev.Object.Spec))
	sel, err := dbs.List(ctx, client.ListOptions{LabelSelector: "env=prod"})
	require.NoError(t, err)
	require.Len(t, sel.Items, 1)
	require.JSONEq(t, `{"size":80,"old":"x","tier":"standard"}`, string(sel.Items[0].Spec))
	require.Equal(t, 1, sel.Items[0].Metadata.SchemaRevision)

	problem(t, raw.do(t, "GET", "/v1/kinds/Db/revisions/2147483648", b.secret, nil), 400, "validation")
	problem(t, raw.do(t, "GET", "/v1/kinds/Db/revisions/9", b.secret, nil), 404, "not-found")
	// The other scope's path and built-in kinds are 404s that say where to go.
	problem(t, raw.do(t, "GET", "/v1/resources/Db", b.secret, nil), 404, "not-found")
	problem(t, raw.do(t, "GET", "/v1/orgs/acme/resources/Node", b.secret, nil), 404, "not-found")
	r = raw.do(t, "PUT", "/v1/kinds/Db", b.secret, strings.NewReader(`{"schema":{"type":"object","properties":{"size":{"type":"string"}}}}`))
	p = problem(t, r, 409, "conflict")
	require.NotNil(t, p.Report, "a refused registration carries its report")
	require.False(t, p.Report.Compatible)
}
