package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// TestSecretMapKeysAreStructure pins finding 8(c) of issue 27 as docs/security.md decides
// it ("Map keys are not secret"): a secret row's masked shape keeps its structure — every
// map key, list lengths — and masks only the leaves, for the row and the render alike; the
// plaintext of leaves never shows. Changing this (sealing keys) must change the document.
func TestSecretMapKeysAreStructure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`},
		{"POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`},
		{"PUT", "/v1/pillar-categories/creds", `{"secret":true}`},
		{"PUT", "/v1/nodes/web01/pillars/creds", `{"users":{"alice":{"password":"leaf-s3cret"}},"ids":["a","b"]}`},
	} {
		r := b.do(t, c.method, c.path, b.admin, strings.NewReader(c.body))
		require.Less(t, r.status, 300, "%s %s: %s", c.method, c.path, r.body)
	}
	_, viewer, err := b.tokens.Create(context.Background(), auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "viewer", Scopes: []string{"pillars:read:*", "pillars:render:*"}})
	require.NoError(t, err)
	r := b.do(t, "GET", "/v1/nodes/web01/pillars/creds", viewer, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var row struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &row))
	require.JSONEq(t, `{"users":{"alice":{"password":"(secret)"}},"ids":["(secret)","(secret)"]}`, string(row.Data))
	r = b.do(t, "GET", "/v1/nodes/web01/pillar", viewer, nil)
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), `"alice"`)
	require.NotContains(t, string(r.body), "leaf-s3cret")
}
