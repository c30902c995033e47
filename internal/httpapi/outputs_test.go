package httpapi_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
)

// stateWithSecret is a state whose resource holds a secret and whose outputs do not.
const stateWithSecret = `{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"L1",` +
	`"outputs":{"endpoint":{"value":"db:5432","type":"string"},"pw":{"value":"shared","type":"string","sensitive":true}},` +
	`"resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"input":"s3cr3t"}}]}],` +
	`"check_results":null}`

// TestReadOutputsScope: a token holding only state:read-outputs gets, from GET and HEAD,
// the state's head and outputs without resources, with a Content-MD5 and Content-Length of
// the bytes it gets; a state:read token still gets the stored bytes. Every other route,
// state writes, locks, versions and restore included, is refused to it, and an encrypted
// payload is a 422, never passed through.
func TestReadOutputsScope(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	sys := auth.AuditActor{Actor: "test"}
	_, outputs, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "outputs", Scopes: []string{"state:read-outputs:net"}})
	require.NoError(t, err)
	_, reader, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "reader", Scopes: []string{"state:read:net"}})
	require.NoError(t, err)
	path := "/v1/state/net/default"
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(stateWithSecret)).status)

	r := b.do(t, "GET", path, outputs, nil)
	require.Equal(t, 200, r.status, string(r.body))
	require.NotContains(t, string(r.body), "s3cr3t")
	require.Equal(t, b64md5(string(r.body)), r.header.Get("Content-MD5"))
	var got struct {
		Version          int             `json:"version"`
		TerraformVersion string          `json:"terraform_version"`
		Serial           int64           `json:"serial"`
		Lineage          string          `json:"lineage"`
		Outputs          json.RawMessage `json:"outputs"`
		Resources        []any           `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Equal(t, 4, got.Version)
	require.Equal(t, "1.11.4", got.TerraformVersion)
	require.Equal(t, int64(3), got.Serial)
	require.Equal(t, "L1", got.Lineage)
	require.NotNil(t, got.Resources)
	require.Empty(t, got.Resources)
	require.JSONEq(t, `{"endpoint":{"value":"db:5432","type":"string"},"pw":{"value":"shared","type":"string","sensitive":true}}`, string(got.Outputs))
	head := b.do(t, "HEAD", path, outputs, nil)
	require.Equal(t, 200, head.status)
	require.Equal(t, r.header.Get("Content-MD5"), head.header.Get("Content-MD5"))
	require.Equal(t, strconv.Itoa(len(r.body)), head.header.Get("Content-Length"))

	full := b.do(t, "GET", path, reader, nil)
	require.Equal(t, 200, full.status)
	require.Equal(t, stateWithSecret, string(full.body), "state:read gets the stored bytes")
	require.Equal(t, b64md5(stateWithSecret), full.header.Get("Content-MD5"))

	problem(t, b.do(t, "GET", "/v1/state/other/default", outputs, nil), 403, "forbidden")
	problem(t, b.do(t, "GET", path+"-nope", outputs, nil), 404, "not-found")

	// Every other route is refused (lists leave net out): the scope grants GET of the state
	// and nothing else.
	for _, c := range authzCases {
		method := strings.SplitN(c.pattern, " ", 2)[0]
		if c.pattern == "GET /v1/state/{project}/{workspace}" {
			continue
		}
		r := b.do(t, method, c.path, outputs, strings.NewReader(c.body))
		if c.salt {
			require.Equal(t, 200, r.status, c.pattern)
			require.Contains(t, string(r.body), `{"_errors":["strata: cannot render the pillar of minion`, "Salt sees the refusal as an _errors text")
			require.Contains(t, string(r.body), "lacks the scope", "Salt sees the refusal as an _errors text")
			continue
		}
		if c.list {
			// A list answers 403 to a token with no scope of its family (tokens), or 200
			// with what the token may see (orgs, projects): never net itself.
			require.Contains(t, []int{200, 403}, r.status, c.pattern)
			require.NotContains(t, string(r.body), `"net"`, c.pattern)
			continue
		}
		require.Equal(t, 403, r.status, "%s answered %d: %s", c.pattern, r.status, r.body)
	}
	full = b.do(t, "GET", path, reader, nil)
	require.Equal(t, stateWithSecret, string(full.body), "nothing the outputs token tried changed the state")
	require.Contains(t, string(b.do(t, "GET", path+"/lock", reader, nil).body), `"locked":false`)

	// OpenTofu's client-side encrypted payload: refused to the outputs token, served as
	// stored to the reader.
	enc := `{"meta":{"key_provider.pbkdf2.k":"eyJz"},"encrypted_data":"s3cr3tcipher","encryption_version":"v0"}`
	require.Equal(t, 200, b.do(t, "POST", "/v1/state/net/enc", b.admin, strings.NewReader(enc)).status)
	p := problem(t, b.do(t, "GET", "/v1/state/net/enc", outputs, nil), 422, "unprocessable")
	require.Contains(t, p.Detail, "encrypted")
	require.NotContains(t, p.Detail, "s3cr3t")
	require.Equal(t, enc, string(b.do(t, "GET", "/v1/state/net/enc", reader, nil).body))
}
