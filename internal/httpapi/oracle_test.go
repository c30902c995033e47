package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/httpapi"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

// Issue 27, findings 3, 4, 8(b) and 8(g): no answer is an oracle for a value the caller may
// not read, and a kind registration rewrites no pillar row its registrant may not write.

const (
	oracleRight = "right-KEY-0451"
	oracleWrong = "wrong-KEY-0452"
)

// setupHeld is setup wired as the server wires typed pillar categories: one kind registry
// validates objects and pillar rows of bound categories and presents those rows under a
// new revision (server.New connects them the same way).
func setupHeld(t *testing.T) *testBundle {
	t.Helper()
	b, _, _ := setupHeldKeys(t)
	return b
}

// setupHeldKeys is setupHeld answering the database and the replica's keyring too.
func setupHeldKeys(t *testing.T) (*testBundle, *db.DB, *secret.Keyring) {
	t.Helper()
	d := pgtest.NewDB(t)
	tokens := auth.NewService(d)
	admin, err := tokens.Bootstrap(context.Background(), "")
	require.NoError(t, err)
	keys := testKeys(t)
	return &testBundle{srv: heldReplica(t, d, tokens, keys), admin: admin, tokens: tokens}, d, keys
}

// heldReplica is a server over d with keys, as one replica of an installation.
func heldReplica(t *testing.T, d *db.DB, tokens *auth.Service, keys *secret.Keyring) *httptest.Server {
	t.Helper()
	pillars := pillar.NewService(d)
	pillars.UseKeys(keys)
	resources := resource.NewService(d)
	kinds := kind.NewService(d)
	resources.UseSchemas(kinds)
	pillars.UseKinds(kinds)
	kinds.SetHolder(pillars)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Tokens: tokens, Resources: resources, Kinds: kinds, Pillars: pillars, Keys: keys,
		MaxBodyBytes: 64 << 10, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	serveListsFromIndex(t, resources)
	return srv
}

// adminMust runs admin requests that must succeed.
func (b *testBundle) adminMust(t *testing.T, reqs ...[3]string) {
	t.Helper()
	for _, c := range reqs {
		r := b.do(t, c[0], c[1], b.admin, strings.NewReader(c[2]))
		require.Less(t, r.status, 300, "%s %s: %s", c[0], c[1], r.body)
	}
}

// secretNode is victim's node vdb01 with a secret row creds holding oracleRight.
func secretNode(t *testing.T, b *testBundle) {
	t.Helper()
	b.adminMust(t,
		[3]string{"POST", "/v1/orgs", `{"metadata":{"name":"victim"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"vdb01"},"spec":{"org":"victim"}}`},
		[3]string{"PUT", "/v1/pillar-categories/creds", `{"secret":true}`},
		[3]string{"PUT", "/v1/nodes/vdb01/pillars/creds", `{"node_key":"` + oracleRight + `"}`},
	)
}

// rowRevision is the stored revision of a row, read as admin.
func rowRevision(t *testing.T, b *testBundle, path string) int64 {
	t.Helper()
	r := b.do(t, "GET", path, b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var p struct {
		Revision int64 `json:"revision"`
	}
	require.NoError(t, json.Unmarshal(r.body, &p))
	return p.Revision
}

// TestImportIsNoSecretOracle is finding 3: a pillars:write:* token without read-secrets sent
// a guess of a secret row through a dry-run import and read `unchanged` for the right guess,
// `updated` for a wrong one. Now both imports (ndjson sync and Salt tree), dry run and real,
// answer `updated` for either guess to such a caller, and a real import writes a new
// revision; a caller holding pillars:read-secrets on the row still gets `unchanged` for the
// right value (the control). Seen failing before the fix (the right guess was `unchanged`).
func TestImportIsNoSecretOracle(t *testing.T) {
	t.Parallel()
	b := setupHeld(t)
	secretNode(t, b)
	writer := b.token(t, "writer", "pillars:write:*", "nodes:write:*", "groups:write:victim", "orgs:attach:victim")
	revealer := b.token(t, "revealer", "pillars:write:*", "nodes:write:*", "groups:write:victim", "orgs:attach:victim", "pillars:read-secrets:node/vdb01")
	const row = "/v1/nodes/vdb01/pillars/creds"

	syncAction := func(token, guess string, dry bool) string {
		t.Helper()
		body := `{"type":"header","version":1}` + "\n" +
			`{"type":"row","target":"node/vdb01","category":"creds","data":{"node_key":"` + guess + `"}}` + "\n"
		r := b.do(t, "POST", "/v1/pillars:import?format=ndjson&dryRun="+strconv.FormatBool(dry), token, strings.NewReader(body))
		require.Equal(t, 200, r.status, string(r.body))
		require.NotContains(t, string(r.body), oracleRight)
		var rep pillar.SyncReport
		require.NoError(t, json.Unmarshal(r.body, &rep))
		require.Len(t, rep.Items, 1)
		return rep.Items[0].Action
	}
	treeAction := func(token, guess string, dry bool) string {
		t.Helper()
		body, err := json.Marshal(map[string]any{"files": map[string]string{
			"top.sls":   "base:\n  vdb01:\n    - creds\n",
			"creds.sls": "node_key: " + guess + "\n",
		}})
		require.NoError(t, err)
		r := b.do(t, "POST", "/v1/pillars:import?org=victim&dryRun="+strconv.FormatBool(dry), token, strings.NewReader(string(body)))
		require.Equal(t, 200, r.status, string(r.body))
		require.NotContains(t, string(r.body), oracleRight)
		var rep pillar.ImportReport
		require.NoError(t, json.Unmarshal(r.body, &rep))
		require.Len(t, rep.Rows, 1)
		return rep.Rows[0].Action
	}
	for name, action := range map[string]func(token, guess string, dry bool) string{"sync": syncAction, "tree": treeAction} {
		for _, guess := range []string{oracleWrong, oracleRight} {
			require.Equal(t, "updated", action(writer, guess, true), "%s dry run, guess %s", name, guess)
		}
		require.Equal(t, "unchanged", action(revealer, oracleRight, true), "%s: a caller who may read the row is told", name)
		require.Equal(t, "updated", action(revealer, oracleWrong, true), name)

		// A real import of the right value by the blind writer writes a new revision.
		before := rowRevision(t, b, row)
		require.Equal(t, "updated", action(writer, oracleRight, false), name)
		require.Equal(t, before+1, rowRevision(t, b, row), "%s: the import wrote what it reported", name)
		require.Equal(t, "unchanged", action(revealer, oracleRight, false), name)
		require.Equal(t, before+1, rowRevision(t, b, row), name)
	}
	r := b.do(t, "GET", row, b.admin, nil)
	require.Contains(t, string(r.body), oracleRight, "the value stayed the right one")
}

// ntpHTTPSchema is a kind for a pillar formula: servers, and maxpoll at most maxpoll; extra
// properties are appended.
func ntpHTTPSchema(maxpoll int, extra ...string) string {
	props := `"servers":{"type":"array","items":{"type":"string"}},"maxpoll":{"type":"integer","maximum":` + strconv.Itoa(maxpoll) + `}`
	for _, e := range extra {
		props += "," + e
	}
	return `{"type":"object","additionalProperties":false,"properties":{` + props + `}}`
}

// TestStoredKindReportNeedsReadSecrets is finding 8(b): a stored registration report named
// the secret rows that violate a registered constraint to any pillars:read holder of their
// target, which tells whether a secret value passes it. Now a sealed row appears in a stored
// report only for a reader holding pillars:read-secrets on its target (the control); plain
// rows stay visible with pillars:read. Seen failing before the fix (the secret row was
// listed to the reader without read-secrets).
func TestStoredKindReportNeedsReadSecrets(t *testing.T) {
	t.Parallel()
	b := setupHeld(t)
	b.adminMust(t,
		[3]string{"PUT", "/v1/kinds/NtpFormula", `{"scope":"global","schema":` + ntpHTTPSchema(17) + `}`},
		[3]string{"POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"web02"},"spec":{"org":"acme"}}`},
		[3]string{"PUT", "/v1/pillar-categories/ntp", `{"kind":"NtpFormula","secret":true}`},
		[3]string{"PUT", "/v1/pillar-categories/plainntp", `{"kind":"NtpFormula"}`},
		[3]string{"PUT", "/v1/nodes/web02/pillars/ntp", `{"servers":["b"],"maxpoll":15}`},
		[3]string{"PUT", "/v1/nodes/web01/pillars/plainntp", `{"servers":["a"],"maxpoll":16}`},
	)
	r := b.do(t, "PUT", "/v1/kinds/NtpFormula", b.admin, strings.NewReader(`{"schema":`+ntpHTTPSchema(12)+`}`))
	require.Equal(t, 201, r.status, string(r.body))
	secretLabel, plainLabel := kind.HeldLabel("node/web02/ntp"), kind.HeldLabel("node/web01/plainntp")
	require.Contains(t, string(r.body), secretLabel, "the registrant, who may read everything, is shown the row")

	reader := b.token(t, "reader", "kinds:read:*", "pillars:read:*")
	revealer := b.token(t, "revealer", "kinds:read:*", "pillars:read:*", "pillars:read-secrets:node/web02")
	for _, path := range []string{"/v1/kinds/NtpFormula/revisions/2", "/v1/kinds/NtpFormula/revisions"} {
		r := b.do(t, "GET", path, reader, nil)
		require.Equal(t, 200, r.status, string(r.body))
		require.NotContains(t, string(r.body), secretLabel, path)
		require.Contains(t, string(r.body), plainLabel, "%s: a plain row is shown to a reader of its target", path)
		r = b.do(t, "GET", path, revealer, nil)
		require.Equal(t, 200, r.status, string(r.body))
		require.Contains(t, string(r.body), secretLabel, "%s: a reader of the secret is shown it", path)
	}
}

// TestKindRegistrationNeedsPillarsWrite is finding 4: kinds:write:<Kind> alone rewrote pillar
// rows of every org bound to the kind, secret rows included — a new revision's default is
// written into every bound row (Salt reads rows, not the registry). Now a registration
// that changes the stored presentation of bound rows needs pillars:write on every target
// holding such a row: without it the registration, dry run alike, is a 403 naming the first
// missing scope, nothing is registered and no row changes; with pillars:write:* it is
// registered and the rows carry the default. Seen failing before the fix (the kinds:write
// token's registration was a 201 and the default reached victim's rows).
func TestKindRegistrationNeedsPillarsWrite(t *testing.T) {
	t.Parallel()
	b := setupHeld(t)
	b.adminMust(t,
		[3]string{"PUT", "/v1/kinds/NtpFormula", `{"scope":"global","schema":` + ntpHTTPSchema(17) + `}`},
		[3]string{"POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`},
		[3]string{"POST", "/v1/orgs", `{"metadata":{"name":"victim"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"web01"},"spec":{"org":"acme"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"vdb01"},"spec":{"org":"victim"}}`},
		[3]string{"PUT", "/v1/pillar-categories/ntp", `{"kind":"NtpFormula"}`},
		[3]string{"PUT", "/v1/pillar-categories/ntpkeys", `{"kind":"NtpFormula","secret":true}`},
		[3]string{"PUT", "/v1/nodes/web01/pillars/ntp", `{"servers":["a.acme.example"]}`},
		[3]string{"PUT", "/v1/nodes/vdb01/pillars/ntp", `{"servers":["v.victim.example"]}`},
		[3]string{"PUT", "/v1/nodes/vdb01/pillars/ntpkeys", `{"servers":["s.victim.example"]}`},
	)
	withDefault := `{"schema":` + ntpHTTPSchema(17, `"pool":{"type":"string","default":"ntp.attacker.example"}`) + `}`
	rows := []string{"/v1/nodes/web01/pillars/ntp", "/v1/nodes/vdb01/pillars/ntp", "/v1/nodes/vdb01/pillars/ntpkeys"}
	unchanged := func(what string) {
		t.Helper()
		for _, row := range rows {
			r := b.do(t, "GET", row, b.admin, nil)
			require.Equal(t, 200, r.status, string(r.body))
			require.NotContains(t, string(r.body), "attacker", "%s: %s", what, row)
			require.Contains(t, string(r.body), `"revision":1`, "%s: %s", what, row)
		}
		r := b.do(t, "GET", "/v1/kinds/NtpFormula", b.admin, nil)
		require.Contains(t, string(r.body), `"revision":1`, "%s: nothing registered", what)
	}

	kinder := b.token(t, "kinder", "kinds:write:NtpFormula", "kinds:read:NtpFormula")
	acmeWriter := b.token(t, "acme-writer", "kinds:write:NtpFormula", "kinds:read:NtpFormula", "pillars:write:node/web01")
	for _, dry := range []string{"true", "false"} {
		p := problem(t, b.do(t, "PUT", "/v1/kinds/NtpFormula?dryRun="+dry, kinder, strings.NewReader(withDefault)), 403, "forbidden")
		require.Contains(t, p.Detail, "pillars:write:node/web01", "the first row's scope is named")
		unchanged("kinds:write only, dryRun=" + dry)
		p = problem(t, b.do(t, "PUT", "/v1/kinds/NtpFormula?dryRun="+dry, acmeWriter, strings.NewReader(withDefault)), 403, "forbidden")
		require.Contains(t, p.Detail, "pillars:write:node/vdb01", "the first scope missing is victim's node")
		unchanged("pillars:write on acme's node only, dryRun=" + dry)
	}
	// A change that presents no row differently (a description) needs no pillar scope.
	described := `{"schema":` + strings.Replace(ntpHTTPSchema(17), `"type":"object",`, `"type":"object","description":"NTP servers",`, 1) + `}`
	r := b.do(t, "PUT", "/v1/kinds/NtpFormula", kinder, strings.NewReader(described))
	require.Equal(t, 201, r.status, string(r.body))

	full := b.token(t, "full", "kinds:write:NtpFormula", "kinds:read:NtpFormula", "pillars:write:*")
	r = b.do(t, "PUT", "/v1/kinds/NtpFormula?dryRun=true", full, strings.NewReader(withDefault))
	require.Equal(t, 200, r.status, string(r.body))
	r = b.do(t, "PUT", "/v1/kinds/NtpFormula", full, strings.NewReader(withDefault))
	require.Equal(t, 201, r.status, string(r.body))
	for _, row := range rows {
		r := b.do(t, "GET", row, b.admin, nil)
		require.Contains(t, string(r.body), "ntp.attacker.example", "the registrant may write %s: the default is stored", row)
	}
}

// TestSyncSealedThatDoesNotOpen is finding 8(g): a sync row whose client-supplied sealed
// value did not open was a 500, or a 503 listing this replica's key ids. Now such a value —
// malformed, sealed with a key no value of the database uses, or sealed for another row, in
// the row or in a history entry — is a 422 naming the record's line, dry run alike, that
// lists no key id of this replica; nothing is written. A value sealed with a key other values
// of the database use but this replica lacks is this replica's fault, a 503 naming no key id
// either. The control: a value sealed here for the row opens. Seen failing before the fix
// (a 500 for the malformed value, a 503 listing the key ids for the foreign one).
func TestSyncSealedThatDoesNotOpen(t *testing.T) {
	t.Parallel()
	b, d, keys := setupHeldKeys(t)
	secretNode(t, b)
	writer := b.token(t, "writer", "pillars:write:*")
	aad := []byte("strata pillar\x00node/vdb01\x00creds") // the row's identity a seal binds
	plain := []byte(`{"node_key":"synced-KEY"}`)
	foreign := testKeys(t)
	fromForeign, err := foreign.Seal(plain, aad)
	require.NoError(t, err)
	otherRow, err := keys.Seal(plain, []byte("strata pillar\x00node/vdb02\x00creds"))
	require.NoError(t, err)
	good, err := keys.Seal(plain, aad)
	require.NoError(t, err)

	stream := func(row map[string]any) string {
		line, err := json.Marshal(row)
		require.NoError(t, err)
		return `{"type":"header","version":1}` + "\n" + string(line) + "\n"
	}
	row := func(sealed []byte) map[string]any {
		return map[string]any{"type": "row", "target": "node/vdb01", "category": "creds", "data": map[string]any{"node_key": "(secret)"}, "sealed": sealed}
	}
	withHistory := func(sealed []byte) map[string]any {
		r := row(good)
		r["history"] = []map[string]any{{"revision": 7, "old": nil, "new": map[string]any{"node_key": "(secret)"}, "actor": "elsewhere", "at": "2026-01-02T03:04:05Z", "newSealed": sealed}}
		return r
	}
	before := rowRevision(t, b, "/v1/nodes/vdb01/pillars/creds")
	for name, body := range map[string]string{
		"malformed":           stream(row([]byte("not a sealed value at all"))),
		"foreign key":         stream(row(fromForeign)),
		"another row's value": stream(row(otherRow)),
		"history entry":       stream(withHistory(fromForeign)),
	} {
		for _, dry := range []string{"true", "false"} {
			r := b.do(t, "POST", "/v1/pillars:import?format=ndjson&dryRun="+dry, writer, strings.NewReader(body))
			p := problem(t, r, 422, "unprocessable")
			require.NotEmpty(t, p.Errors, "%s: %s", name, r.body)
			require.Equal(t, "line 2", p.Errors[0].Field, name)
			for _, id := range keys.IDs() {
				require.NotContains(t, string(r.body), id, "%s: the answer lists this replica's key", name)
			}
		}
	}
	require.Equal(t, before, rowRevision(t, b, "/v1/nodes/vdb01/pillars/creds"), "nothing was written")
	h := b.do(t, "GET", "/v1/nodes/vdb01/pillars/creds/history", b.admin, nil)
	require.NotContains(t, string(h.body), "elsewhere", "no history entry was added")

	r := b.do(t, "POST", "/v1/pillars:import?format=ndjson", writer, strings.NewReader(stream(row(good))))
	require.Equal(t, 200, r.status, "control: a value sealed here for the row opens: %s", r.body)
	require.Contains(t, string(b.do(t, "GET", "/v1/nodes/vdb01/pillars/creds", b.admin, nil).body), "synced-KEY")

	// A replica of the same database started without the key its values use.
	lacking := testKeys(t)
	other := &testBundle{srv: heldReplica(t, d, b.tokens, lacking), admin: b.admin, tokens: b.tokens}
	r = other.do(t, "POST", "/v1/pillars:import?format=ndjson&dryRun=true", writer, strings.NewReader(stream(row(good))))
	problem(t, r, 503, "unavailable")
	for _, id := range append(lacking.IDs(), keys.IDs()...) {
		require.NotContains(t, string(r.body), id)
	}
	r = other.do(t, "POST", "/v1/pillars:import?format=ndjson&dryRun=true", writer, strings.NewReader(stream(row(fromForeign))))
	problem(t, r, 422, "unprocessable")
}

// TestRatchetIsNoSecretOracle (issue 27, item 6): ratcheting accepts a write that keeps a
// stored value's violation of a tightened constraint unchanged. Against a secret row, a
// writer who may not read it would learn from that whether a guess equals the stored value:
// so the writer is not ratcheted, and a right and a wrong guess that violate the kind get the
// same 422, word for word. A writer who may read the row is ratcheted (the control). Seen
// failing with the blind writer ratcheted against the stored value (Put's `case blind`
// removed): the right guess was a 200.
func TestRatchetIsNoSecretOracle(t *testing.T) {
	t.Parallel()
	b := setupHeld(t)
	b.adminMust(t,
		[3]string{"PUT", "/v1/kinds/NtpFormula", `{"scope":"global","schema":` + ntpHTTPSchema(17) + `}`},
		[3]string{"POST", "/v1/orgs", `{"metadata":{"name":"victim"}}`},
		[3]string{"POST", "/v1/nodes", `{"metadata":{"name":"vdb01"},"spec":{"org":"victim"}}`},
		[3]string{"PUT", "/v1/pillar-categories/ntp", `{"kind":"NtpFormula","secret":true}`},
		[3]string{"PUT", "/v1/nodes/vdb01/pillars/ntp", `{"servers":["s.victim.example"],"maxpoll":15}`},
		[3]string{"PUT", "/v1/kinds/NtpFormula", `{"schema":` + ntpHTTPSchema(12) + `}`}, // the stored 15 now violates it
	)
	const row = "/v1/nodes/vdb01/pillars/ntp"
	guess := func(n int) string { return `{"servers":["s.victim.example"],"maxpoll":` + strconv.Itoa(n) + `}` }
	writer := b.token(t, "writer", "pillars:write:*", "pillars:read:*")
	right := b.do(t, "PUT", row, writer, strings.NewReader(guess(15)))
	wrong := b.do(t, "PUT", row, writer, strings.NewReader(guess(14)))
	problem(t, right, 422, "unprocessable")
	problem(t, wrong, 422, "unprocessable")
	require.Equal(t, string(wrong.body), string(right.body), "the answers to a right and a wrong guess are the same")
	require.Equal(t, int64(1), rowRevision(t, b, row))

	reader := b.token(t, "reader", "pillars:write:*", "pillars:read:*", "pillars:read-secrets:node/vdb01")
	problem(t, b.do(t, "PUT", row, reader, strings.NewReader(guess(14))), 422, "unprocessable")
	r := b.do(t, "PUT", row, reader, strings.NewReader(guess(15)))
	require.Equal(t, 200, r.status, "control: a writer who may read the row keeps its violation (ratcheting): %s", r.body)
}

// TestSaltExportOfSecretNeedsReadSecrets (issue 27, item 6): a Salt tree holds plaintext, so
// exporting a secret row to a reader without pillars:read-secrets on its target — whole or
// the row's org — is a 403 naming the scope, whose answer holds no file and no plaintext; a
// reader with read-secrets gets the plaintext (the control). Seen failing with Export's
// read-secrets check removed (a 200 with the plaintext in a file).
func TestSaltExportOfSecretNeedsReadSecrets(t *testing.T) {
	t.Parallel()
	b := setupHeld(t)
	secretNode(t, b)
	b.adminMust(t, [3]string{"PUT", "/v1/orgs/victim/pillars/app", `{"port":8080}`})
	reader := b.token(t, "reader", "pillars:read:*")
	for _, path := range []string{"/v1/pillars:export", "/v1/pillars:export?org=victim"} {
		r := b.do(t, "GET", path, reader, nil)
		p := problem(t, r, 403, "forbidden")
		require.Contains(t, p.Detail, "pillars:read-secrets:node/vdb01", path)
		require.NotContains(t, string(r.body), oracleRight, path)
		require.NotContains(t, string(r.body), "files", path)
	}
	revealer := b.token(t, "revealer", "pillars:read:*", "pillars:read-secrets:node/vdb01")
	r := b.do(t, "GET", "/v1/pillars:export", revealer, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var tree pillar.Export
	require.NoError(t, json.Unmarshal(r.body, &tree))
	found := false
	for _, content := range tree.Files {
		found = found || strings.Contains(content, oracleRight)
	}
	require.True(t, found, "control: a reader of the secret gets it in the tree")
}
