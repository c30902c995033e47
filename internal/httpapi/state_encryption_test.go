package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
	"github.com/stratahq/strata/internal/tfstate"
)

// setupStateKeys is setupState with an encryption keyring (nil: a server without a key).
func setupStateKeys(t *testing.T, keys *secret.Keyring) *testBundle {
	t.Helper()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{Logger: quiet, Keys: keys})
	require.NoError(t, err)
	require.NoError(t, st.Start(ctx))
	t.Cleanup(func() { _ = st.Close() })
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), State: st,
		Logger: quiet, MaxBodyBytes: 1 << 20}))
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, admin: admin, tokens: tokens}
}

// TestEncryptedProjectHTTP (issue 22 item 4): PUT with {"encryption": true} makes an
// encrypted project; the http backend, versions (list, get, restore) and outputs-only reads
// work unchanged for clients, with Content-MD5 of the plaintext; credentials answer 409;
// POST …/encrypt converts a plain project in batches; a server without a key answers 409
// naming the flag.
func TestEncryptedProjectHTTP(t *testing.T) {
	t.Parallel()
	raw := make([]byte, secret.KeySize)
	_, _ = rand.Read(raw)
	key, err := secret.NewKey(raw)
	require.NoError(t, err)
	keys, err := secret.NewKeyring(key)
	require.NoError(t, err)
	b := setupStateKeys(t, keys)

	r := b.do(t, "PUT", "/v1/projects/vault", b.admin, strings.NewReader(`{"encryption": true}`))
	require.Equal(t, 201, r.status, string(r.body))
	var p api.Project
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.True(t, p.Encryption)
	require.Equal(t, 200, b.do(t, "PUT", "/v1/projects/vault", b.admin, strings.NewReader(`{"encryption": true}`)).status)
	problem(t, b.do(t, "PUT", "/v1/projects/vault", b.admin, strings.NewReader(`{"encrypted": true}`)), 400, "validation")
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/net", b.admin, nil).status)
	problem(t, b.do(t, "PUT", "/v1/projects/net", b.admin, strings.NewReader(`{"encryption": true}`)), 409, "conflict")

	path := "/v1/state/vault/default"
	v1 := strings.Replace(stateV1, `"outputs":{}`, `"outputs":{"pw":{"value":"sesame-1","type":"string"}}`, 1)
	v2 := strings.Replace(strings.Replace(v1, `"serial":1`, `"serial":2`, 1), "sesame-1", "sesame-2", 1)
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(v1), "Content-MD5", b64md5(v1)).status)
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(v2)).status)
	r = b.do(t, "GET", path, b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, v2, string(r.body))
	require.Equal(t, b64md5(v2), r.header.Get("Content-MD5"), "Content-MD5 of the plaintext")

	r = b.do(t, "GET", path+"/versions", b.admin, nil)
	require.Equal(t, 200, r.status)
	var vs struct{ Items []api.StateVersion }
	require.NoError(t, json.Unmarshal(r.body, &vs))
	require.Len(t, vs.Items, 2)
	require.Equal(t, int64(len(v2)), vs.Items[0].Size)
	r = b.do(t, "GET", path+"/versions/1", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, v1, string(r.body))
	require.Equal(t, 200, b.do(t, "POST", path+"/versions/1/restore", b.admin, nil).status)
	r = b.do(t, "GET", path, b.admin, nil)
	require.Contains(t, string(r.body), "sesame-1")
	require.Contains(t, string(r.body), `"serial":3`)

	outputs := b.token(t, "outputs", "state:read-outputs:vault")
	r = b.do(t, "GET", path, outputs, nil)
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), "sesame-1")
	require.NotContains(t, string(r.body), "terraform_data")
	require.Equal(t, b64md5(string(r.body)), r.header.Get("Content-MD5"))

	problem(t, b.do(t, "POST", "/v1/projects/vault/credentials", b.admin, nil), 409, "conflict")

	// Converting net in batches of one.
	require.Equal(t, 200, b.do(t, "POST", "/v1/state/net/default", b.admin, strings.NewReader(stateV1)).status)
	problem(t, b.do(t, "POST", "/v1/projects/net/encrypt?limit=0", b.admin, nil), 400, "validation")
	var step api.ProjectEncryption
	for range 5 {
		r = b.do(t, "POST", "/v1/projects/net/encrypt?limit=1", b.admin, nil)
		require.Equal(t, 200, r.status, string(r.body))
		require.NoError(t, json.Unmarshal(r.body, &step))
		if step.Done {
			break
		}
	}
	require.True(t, step.Done)
	r = b.do(t, "GET", "/v1/projects/net", b.admin, nil)
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.True(t, p.Encryption)
	r = b.do(t, "GET", "/v1/state/net/default", b.admin, nil)
	require.Equal(t, stateV1, string(r.body))

	bare := setupStateKeys(t, nil)
	pr := problem(t, bare.do(t, "PUT", "/v1/projects/vault", bare.admin, strings.NewReader(`{"encryption": true}`)), 409, "conflict")
	require.Contains(t, pr.Detail, "--encryption-key-file")
}
