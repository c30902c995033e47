package httpapi_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
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
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/tfstate"
)

func setupState(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	d := pgtest.NewDB(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{MaxStateBytes: 4096, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, st.Start(ctx))
	t.Cleanup(func() { _ = st.Close() })
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(ctx, "")
	require.NoError(t, err)
	resources := resource.NewService(d)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resources, Pillars: pillar.NewService(d), State: st,
		Logger: quiet, MaxBodyBytes: 1024, MaxStateBytes: 4096}))
	t.Cleanup(srv.Close)
	serveListsFromIndex(t, resources)
	b := &testBundle{srv: srv, admin: secret, tokens: tokens}
	require.Equal(t, 201, b.do(t, "PUT", "/v1/projects/net", secret, nil).status)
	return b
}

const stateV1 = `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"L1","outputs":{},"resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[]}]}`

func b64md5(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestStateProtocol(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	path := "/v1/state/net/default"

	problem(t, b.do(t, "GET", path, b.admin, nil), 404, "not-found")
	problem(t, b.do(t, "GET", "/v1/state/nope/default", b.admin, nil), 404, "not-found")
	problem(t, b.do(t, "GET", "/v1/state/Bad-Name/default", b.admin, nil), 400, "validation")

	// Writes: Content-MD5 verified, state size limit (413, above the general body limit).
	problem(t, b.do(t, "POST", path, b.admin, strings.NewReader(stateV1), "Content-MD5", b64md5("other")), 400, "validation")
	problem(t, b.do(t, "POST", path, b.admin, strings.NewReader(stateV1), "Content-MD5", "!!"), 400, "validation")
	require.Greater(t, len(stateV1)+2000, 1024, "the state route is not bound by the general body limit")
	big := strings.Replace(stateV1, `"outputs":{}`, `"outputs":{"pad":{"value":"`+strings.Repeat("x", 2000)+`","type":"string"}}`, 1)
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(big)).status)
	huge := strings.Replace(stateV1, `"outputs":{}`, `"outputs":{"pad":{"value":"`+strings.Repeat("x", 5000)+`","type":"string"}}`, 1)
	problem(t, b.do(t, "POST", "/v1/state/net/other", b.admin, strings.NewReader(huge)), 413, "too-large")

	r := b.do(t, "POST", path, b.admin, strings.NewReader(strings.Replace(big, `"serial":1`, `"serial":2`, 1)), "Content-MD5", b64md5(strings.Replace(big, `"serial":1`, `"serial":2`, 1)))
	require.Equal(t, 200, r.status, string(r.body))
	r = b.do(t, "GET", path, b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, b64md5(string(r.body)), r.header.Get("Content-MD5"))
	require.Contains(t, string(r.body), `"serial":2`)

	// Stale: a lower serial is refused; an identical retry is fine.
	problem(t, b.do(t, "POST", path, b.admin, strings.NewReader(big)), 409, "conflict")
	require.Equal(t, 200, b.do(t, "POST", path, b.admin, strings.NewReader(strings.Replace(big, `"serial":1`, `"serial":2`, 1))).status)

	// LOCK: 200, idempotent; someone else gets 423 with the holder's LockInfo (not a problem).
	lockA := `{"ID":"A","Operation":"OperationTypeApply","Who":"alice@host","Version":"1.11.4","Created":"2026-11-22T06:00:00Z","Path":""}`
	require.Equal(t, 200, b.do(t, "LOCK", path, b.admin, strings.NewReader(lockA)).status)
	require.Equal(t, 200, b.do(t, "LOCK", path, b.admin, strings.NewReader(lockA)).status)
	r = b.do(t, "LOCK", path, b.admin, strings.NewReader(`{"ID":"B","Who":"bob"}`))
	require.Equal(t, 423, r.status)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var holder api.LockInfo
	require.NoError(t, json.Unmarshal(r.body, &holder))
	require.Equal(t, "A", holder.ID)
	require.Equal(t, "alice@host", holder.Who)
	problem(t, b.do(t, "LOCK", path, b.admin, strings.NewReader(`{"Who":"no id"}`)), 400, "validation")
	problem(t, b.do(t, "LOCK", path, b.admin, strings.NewReader(`not json`)), 400, "validation")
	p := problem(t, b.do(t, "LOCK", path, b.admin, strings.NewReader(`{"ID":"C","Who":"a\u0000b"}`)), 400, "validation")
	require.Equal(t, "/Who", p.Errors[0].Field)
	p = problem(t, b.do(t, "LOCK", path, b.admin, strings.NewReader(`{"ID":"C","Created":"yesterday"}`)), 400, "validation")
	require.Equal(t, "/Created", p.Errors[0].Field)
	r = b.do(t, "LOCK", "/v1/state/net/created", b.admin, strings.NewReader(`{"ID":"E","Created":""}`))
	require.Equal(t, 200, r.status, "an empty Created is filled in: %s", r.body)
	require.NotContains(t, string(r.body), `"Created":"0001`)
	p = problem(t, b.do(t, "POST", "/v1/state/net/shape", b.admin, strings.NewReader(`{"version":4,"serial":"9","lineage":"L"}`)), 400, "validation")
	require.Equal(t, "/serial", p.Errors[0].Field)

	// While locked, a write must carry the lock's ID.
	s3 := strings.Replace(big, `"serial":1`, `"serial":3`, 1)
	require.Equal(t, 423, b.do(t, "POST", path, b.admin, strings.NewReader(s3)).status)
	require.Equal(t, 423, b.do(t, "POST", path+"?ID=B", b.admin, strings.NewReader(s3)).status)
	require.Equal(t, 200, b.do(t, "POST", path+"?ID=A", b.admin, strings.NewReader(s3)).status)

	r = b.do(t, "GET", path+"/lock", b.admin, nil)
	require.Equal(t, 200, r.status)
	var st api.LockStatus
	require.NoError(t, json.Unmarshal(r.body, &st))
	require.True(t, st.Locked)
	require.Equal(t, "A", st.Info.ID)

	// UNLOCK with someone else's ID: 423 with the holder; OpenTofu's {"ID":…} body releases.
	require.Equal(t, 423, b.do(t, "UNLOCK", path, b.admin, strings.NewReader(`{"ID":"B"}`)).status)
	require.Equal(t, 200, b.do(t, "UNLOCK", path, b.admin, strings.NewReader(`{"ID":"A"}`)).status)
	require.Equal(t, 200, b.do(t, "UNLOCK", path, b.admin, strings.NewReader(`{"ID":"A"}`)).status, "unlocking again is a retry")

	// GitLab-style lock routes.
	require.Equal(t, 200, b.do(t, "POST", path+"/lock", b.admin, strings.NewReader(`{"ID":"G","Who":"gitlab"}`)).status)
	require.Equal(t, 423, b.do(t, "POST", path+"/lock", b.admin, strings.NewReader(`{"ID":"H"}`)).status)
	require.Equal(t, 200, b.do(t, "DELETE", path+"/lock", b.admin, strings.NewReader(`{"ID":"G"}`)).status)

	// Versions.
	r = b.do(t, "GET", path+"/versions", b.admin, nil)
	require.Equal(t, 200, r.status)
	var vs struct{ Items []api.StateVersion }
	require.NoError(t, json.Unmarshal(r.body, &vs))
	require.Len(t, vs.Items, 3)
	r = b.do(t, "GET", path+"/versions/1", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, big, string(r.body), "versions are stored verbatim")
	require.Equal(t, "1", r.header.Get("X-Strata-Serial"))
	problem(t, b.do(t, "GET", path+"/versions/zero", b.admin, nil), 400, "validation")
	problem(t, b.do(t, "GET", path+"/versions/99", b.admin, nil), 404, "not-found")
	require.Equal(t, 200, b.do(t, "POST", path+"/versions/1/restore", b.admin, nil).status)
	r = b.do(t, "GET", path, b.admin, nil)
	require.Contains(t, string(r.body), `"serial":4`, "restore writes a new serial")

	r = b.do(t, "GET", "/v1/state/net", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"name":"default"`)

	// DELETE: under a lock it needs the lock's ID; the versions stay for a restore.
	require.Equal(t, 200, b.do(t, "LOCK", path, b.admin, strings.NewReader(`{"ID":"D"}`)).status)
	require.Equal(t, 423, b.do(t, "DELETE", path, b.admin, nil).status)
	require.Equal(t, 200, b.do(t, "DELETE", path+"?ID=D", b.admin, nil).status)
	problem(t, b.do(t, "GET", path, b.admin, nil), 404, "not-found")
	require.Equal(t, 200, b.do(t, "GET", path+"/versions/1", b.admin, nil).status)
	require.Equal(t, 200, b.do(t, "POST", path+"/versions/1/restore", b.admin, nil).status)
	require.Equal(t, 200, b.do(t, "HEAD", path, b.admin, nil).status)
}

func TestStateScopes(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	ctx := context.Background()
	sys := auth.AuditActor{Actor: "test"}
	_, reader, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "reader", Scopes: []string{"state:read:net"}})
	require.NoError(t, err)
	_, writer, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "writer", Scopes: []string{"state:write:net"}})
	require.NoError(t, err)
	_, forcer, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "forcer", Scopes: []string{"state:write:net", "state:force-unlock:net"}})
	require.NoError(t, err)
	path := "/v1/state/net/default"

	problem(t, b.do(t, "GET", path, "", nil), 401, "unauthenticated")
	problem(t, b.do(t, "POST", path, reader, strings.NewReader(stateV1)), 403, "forbidden")
	problem(t, b.do(t, "LOCK", path, reader, strings.NewReader(`{"ID":"A"}`)), 403, "forbidden")
	require.Equal(t, 200, b.do(t, "POST", path, writer, strings.NewReader(stateV1)).status)
	require.Equal(t, 200, b.do(t, "GET", path, reader, nil).status)
	problem(t, b.do(t, "GET", "/v1/state/other/default", writer, nil), 403, "forbidden")
	problem(t, b.do(t, "PUT", "/v1/projects/other", writer, nil), 403, "forbidden")
	problem(t, b.do(t, "POST", "/v1/projects/net/credentials", writer, nil), 403, "forbidden")

	// Terraform's force-unlock sends an empty UNLOCK body: only force rights may do that.
	require.Equal(t, 200, b.do(t, "LOCK", path, writer, strings.NewReader(`{"ID":"A","Who":"w"}`)).status)

	// The lock's ID is public (423 bodies, GET …/lock), so another writer presenting it gets
	// nothing: only the token that took the lock, or force rights, may use or release it.
	_, writer2, err := b.tokens.Create(ctx, sys, auth.CreateParams{Name: "writer2", Scopes: []string{"state:write:net"}})
	require.NoError(t, err)
	s2 := strings.Replace(stateV1, `"serial":1`, `"serial":2`, 1)
	problem(t, b.do(t, "POST", path+"?ID=A", writer2, strings.NewReader(s2)), 403, "forbidden")
	problem(t, b.do(t, "UNLOCK", path, writer2, strings.NewReader(`{"ID":"A"}`)), 403, "forbidden")
	require.Equal(t, 200, b.do(t, "POST", path+"?ID=A", writer, strings.NewReader(s2)).status)
	problem(t, b.do(t, "UNLOCK", path, writer, nil), 403, "forbidden")
	r := b.do(t, "GET", path+"/lock", reader, nil)
	require.Contains(t, string(r.body), `"locked":true`)
	require.Equal(t, 200, b.do(t, "UNLOCK", path, forcer, nil).status)
	r = b.do(t, "GET", path+"/lock", reader, nil)
	require.Contains(t, string(r.body), `"locked":false`)
	r = b.do(t, "GET", "/v1/audit?action=state.force-unlock", b.admin, nil)
	require.Contains(t, string(r.body), "forcer")

	// Projects that still hold states need force to delete.
	problem(t, b.do(t, "DELETE", "/v1/projects/net", b.admin, nil), 409, "conflict")
	problem(t, b.do(t, "DELETE", "/v1/projects/net?force=maybe", b.admin, nil), 400, "validation")
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/projects/net?force=true", b.admin, nil).status)
	problem(t, b.do(t, "GET", "/v1/projects/net", b.admin, nil), 404, "not-found")
}

// FuzzStateBodies sends arbitrary bodies to the state protocol's write, LOCK and UNLOCK:
// bad input is always a 4xx, never a 5xx.
func FuzzStateBodies(f *testing.F) {
	ctx := context.Background()
	d := pgtest.NewDB(f)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := tfstate.New(d, tfstate.Options{SessionURL: "", Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	tokens := auth.NewService(d)
	secret, err := tokens.Bootstrap(ctx, "")
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resource.NewService(d), State: st, Logger: quiet, MaxBodyBytes: 1 << 16}))
	f.Cleanup(srv.Close)
	if _, _, err := st.ProjectPut(ctx, tfstate.Actor{Name: "fuzz"}, "fz"); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{stateV1, `{"ID":"x","Who":"y"}`, `{"serial":1e99,"lineage":"l"}`, `{"lineage":5}`, ``, `{"ID":"\u0000"}`, `[]`, `{"serial":-1,"lineage":"l","resources":[1]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := &testBundle{srv: srv, admin: secret}
		for _, m := range []string{"POST", "LOCK", "UNLOCK"} {
			r := b.do(t, m, "/v1/state/fz/default", secret, strings.NewReader(string(body)))
			if r.status >= 500 {
				t.Fatalf("%s with %q: %d %s", m, body, r.status, r.body)
			}
		}
		_ = b.do(t, "UNLOCK", "/v1/state/fz/default?force=true", secret, nil)
	})
}
