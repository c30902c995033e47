package httpapi_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPillarsOverHTTP: rows with ETags and If-Match, 422 for a body that is not an object,
// the merged render with its ETag and 304, explain, and the shared list-merging setting.
func TestPillarsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	put := func(path, body string, hdr ...string) response {
		return b.do(t, "PUT", path, b.admin, strings.NewReader(body), hdr...)
	}
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/nodes", b.admin, strings.NewReader(`{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)).status)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs/acme/groups", b.admin, strings.NewReader(`{"metadata":{"name":"web"},"spec":{"selector":"role=web","priority":1}}`)).status)

	r := put("/v1/pillars/global/app", `{"port":80,"users":["a"],"db":{"host":"x","port":5432}}`)
	require.Equal(t, 201, r.status, string(r.body))
	tag := r.header.Get("ETag")
	require.NotEmpty(t, tag)
	problem(t, put("/v1/pillars/global/app", `{"port":81}`, "If-Match", `"nope"`), 412, "precondition-failed")
	r = put("/v1/pillars/global/app", `{"port":81,"users":["a"],"db":{"host":"x","port":5432}}`, "If-Match", tag)
	require.Equal(t, 200, r.status, string(r.body))
	problem(t, put("/v1/pillars/global/list", `[1,2]`), 422, "unprocessable")
	problem(t, put("/v1/pillars/global/Bad", `{}`), 400, "validation")
	problem(t, put("/v1/nodes/ghost/pillars/app", `{}`), 404, "not-found")

	require.Equal(t, 201, put("/v1/orgs/acme/groups/web/pillars/app", `{"users":["b"],"db":{"host":"y"}}`).status)
	require.Equal(t, 201, put("/v1/nodes/web01/pillars/app", `{"db":{"port":null}}`).status)

	r = b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	require.JSONEq(t, `{"port":81,"users":["b"],"db":{"host":"y","port":null}}`, string(r.body))
	etag := r.header.Get("ETag")
	require.Equal(t, 304, b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil, "If-None-Match", etag).status)

	r = b.do(t, "GET", "/v1/nodes/web01/pillar?explain=true", b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var ex struct {
		Pillar  map[string]any `json:"pillar"`
		Explain []struct {
			Path  string `json:"path"`
			SetBy struct {
				Target   string `json:"target"`
				Category string `json:"category"`
			} `json:"setBy"`
		} `json:"explain"`
	}
	require.NoError(t, json.Unmarshal(r.body, &ex))
	setBy := map[string]string{}
	for _, e := range ex.Explain {
		setBy[e.Path] = e.SetBy.Target
	}
	require.Equal(t, "node/web01", setBy["/db/port"])
	require.Equal(t, "group/acme/web", setBy["/db/host"])
	require.Equal(t, "global", setBy["/port"])

	// List merging is one setting for every replica: users become [a, b].
	require.Equal(t, 200, put("/v1/pillar-settings", `{"mergeLists":true}`).status)
	r = b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.JSONEq(t, `{"port":81,"users":["a","b"],"db":{"host":"y","port":null}}`, string(r.body))
	require.NotEqual(t, etag, r.header.Get("ETag"))

	r = b.do(t, "GET", "/v1/pillars/global/app/history", b.admin, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"old":null`)
	r = b.do(t, "GET", "/v1/pillars/global", b.admin, nil)
	require.Contains(t, string(r.body), `"category":"app"`)
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/pillars/global/app", b.admin, nil).status)
	problem(t, b.do(t, "GET", "/v1/pillars/global/app", b.admin, nil), 404, "not-found")
}

// TestPillarImportOverHTTP: the files of a tree in, the plan out; a dry run changes nothing.
func TestPillarImportOverHTTP(t *testing.T) {
	t.Parallel()
	b := setupState(t)
	require.Equal(t, 201, b.do(t, "POST", "/v1/orgs", b.admin, strings.NewReader(`{"metadata":{"name":"acme"}}`)).status)
	body := `{"files":{"top.sls":"base:\n  '*':\n    - common\n  web01:\n    - web\n","common.sls":"a: yes\n","web/init.sls":"port: 80\n"}}`
	r := b.do(t, "POST", "/v1/pillars:import?org=acme&dryRun=true", b.admin, strings.NewReader(body))
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), `"dryRun":true`)
	problem(t, b.do(t, "GET", "/v1/nodes/web01", b.admin, nil), 404, "not-found")
	r = b.do(t, "POST", "/v1/pillars:import?org=acme", b.admin, strings.NewReader(body))
	require.Equal(t, 200, r.status, string(r.body))
	r = b.do(t, "GET", "/v1/nodes/web01/pillar", b.admin, nil)
	require.JSONEq(t, `{"a":true,"port":80}`, string(r.body))
	problem(t, b.do(t, "POST", "/v1/pillars:import?org=acme", b.admin, strings.NewReader(`{"files":{"../x.sls":"a: 1"}}`)), 400, "validation")
}

// TestPillarImportDecryptedOverHTTP (issue 22): the CLI's decryptions travel in the body;
// the plan marks the row secret and carries no plaintext, the import stores the value, and
// without them the PGP block is a 422 naming its file and line.
func TestPillarImportDecryptedOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	armor := "-----BEGIN PGP MESSAGE-----\n\nhQEMA0x1ZZZZZZZZAQf/abcdef\n-----END PGP MESSAGE-----"
	files := map[string]string{
		"top.sls": "base:\n  '*':\n    - db\n",
		"db.sls":  "db:\n  user: app\n  password: |\n    " + strings.ReplaceAll(armor, "\n", "\n    ") + "\n",
	}
	body, err := json.Marshal(map[string]any{"files": files, "decrypted": map[string]string{armor: "hunter2-plain\n"}})
	require.NoError(t, err)
	r := b.do(t, "POST", "/v1/pillars:import?dryRun=true", b.admin, bytes.NewReader(body))
	require.Equal(t, 200, r.status, string(r.body))
	require.Contains(t, string(r.body), `"secret":true`)
	require.NotContains(t, string(r.body), "hunter2")
	r = b.do(t, "POST", "/v1/pillars:import", b.admin, bytes.NewReader(body))
	require.Equal(t, 200, r.status, string(r.body))
	require.NotContains(t, string(r.body), "hunter2")
	r = b.do(t, "GET", "/v1/pillars/global/db", b.admin, nil)
	require.Contains(t, string(r.body), `"password":"hunter2-plain"`)

	body, err = json.Marshal(map[string]any{"files": files})
	require.NoError(t, err)
	r = b.do(t, "POST", "/v1/pillars:import?dryRun=true", b.admin, bytes.NewReader(body))
	require.Equal(t, 422, r.status, string(r.body))
	require.Contains(t, string(r.body), "db.sls:4")
	require.Contains(t, string(r.body), "PGP-encrypted")
}
