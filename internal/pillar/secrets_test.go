package pillar_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgembed"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
	"github.com/stratahq/strata/internal/secret"
)

func newKeys(t *testing.T, n int) (*secret.Keyring, []secret.Key) {
	t.Helper()
	var keys []secret.Key
	for i := 0; i < n; i++ {
		raw := make([]byte, secret.KeySize)
		_, err := rand.Read(raw)
		require.NoError(t, err)
		k, err := secret.NewKey(raw)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	r, err := secret.NewKeyring(keys...)
	require.NoError(t, err)
	return r, keys
}

// as returns ctx carrying a principal with scopes.
func as(t *testing.T, ctx context.Context, scopes ...string) context.Context {
	t.Helper()
	p := &auth.Principal{Name: "t"}
	for _, s := range scopes {
		sc, err := auth.ParseScope(s)
		require.NoError(t, err)
		p.Scopes = append(p.Scopes, sc)
	}
	return auth.WithPrincipal(ctx, p)
}

// secretWorld is an org with a group holding web01, and plaintext rows of category creds
// at the group and the node (with history), before the category is made secret.
func secretWorld(t *testing.T, keys *secret.Keyring) *bundle {
	t.Helper()
	ctx := context.Background()
	b := setup(t)
	b.svc.UseKeys(keys)
	b.mk(t, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{})
	b.mk(t, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", nil))
	_, err := b.res.AddMember(ctx, "acme", "web", "web01")
	require.NoError(t, err)
	grp := pillar.Target{Kind: "group", Org: "acme", Group: "web"}
	_, _, err = b.svc.Put(ctx, grp, "creds", obj(t, `{"db":{"user":"app","password":"plainOLD-4711"}}`), "", "alice")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, grp, "creds", obj(t, `{"db":{"user":"app","password":"hunter2-GROUP"}}`), "", "alice")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds", obj(t, `{"api":["tok-NODE-1","tok-NODE-2"]}`), "", "alice")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, grp, "app", obj(t, `{"port":8080}`), "", "alice")
	require.NoError(t, err)
	return b
}

var plaintexts = []string{"plainOLD-4711", "hunter2-GROUP", "tok-NODE-1", "tok-NODE-2"}

// tableText is every pillar and pillar history row as text, what a dump of them holds.
func tableText(t *testing.T, d *db.DB) string {
	t.Helper()
	var s string
	require.NoError(t, d.QueryRow(context.Background(), &db.Query{Name: "t", Text: `SELECT
		coalesce((SELECT string_agg(p::text, E'\n') FROM ` + d.Schema() + `.pillars p), '') || E'\n' ||
		coalesce((SELECT string_agg(h::text, E'\n') FROM ` + d.Schema() + `.pillar_history h), '')`}).Scan(&s))
	return s
}

// TestSecretCategory: making a category secret converts its rows and history in place;
// readers without pillars:read-secrets see "(secret)" leaves with the structure, readers
// with it the values; the render masks and reveals likewise with different ETags; the SQL
// function refuses; a restore brings a secret back; a sealed value moved to another row
// does not open.
func TestSecretCategory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	grp := pillar.Target{Kind: "group", Org: "acme", Group: "web"}
	web01 := pillar.Target{Kind: "node", Node: "web01"}

	// Control: before the category is secret, the plaintext is in the tables.
	before := tableText(t, b.db)
	for _, p := range plaintexts {
		require.Contains(t, before, p)
	}

	admin := as(t, ctx, "admin")
	c, _, err := b.svc.SetCategory(admin, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	require.True(t, c.Secret)
	require.Equal(t, 2+3, c.Converted, "two rows and three history entries")
	after := tableText(t, b.db)
	for _, p := range plaintexts {
		require.NotContains(t, after, p)
	}
	require.Contains(t, after, `"(secret)"`)
	require.Contains(t, after, "8080", "other categories are untouched")

	reader := as(t, ctx, "pillars:read:*", "pillars:render:*", "pillars:write:*")
	revealer := as(t, ctx, "pillars:read:*", "pillars:read-secrets:group/acme/*")
	got, err := b.svc.Get(reader, grp, "creds")
	require.NoError(t, err)
	require.True(t, got.Secret)
	require.Equal(t, map[string]any{"db": map[string]any{"user": "(secret)", "password": "(secret)"}}, got.Data)
	got, err = b.svc.Get(revealer, grp, "creds")
	require.NoError(t, err)
	require.Equal(t, "hunter2-GROUP", got.Data["db"].(map[string]any)["password"])
	got, err = b.svc.Get(revealer, web01, "creds")
	require.NoError(t, err)
	require.Equal(t, []any{"(secret)", "(secret)"}, got.Data["api"], "the grant names group/acme/*, not the node")

	// History: masked, or revealed.
	hist, err := b.svc.History(reader, grp, "creds", 0, 10)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	hb, _ := json.Marshal(hist)
	for _, p := range plaintexts {
		require.NotContains(t, string(hb), p)
	}
	hist, err = b.svc.History(revealer, grp, "creds", 0, 10)
	require.NoError(t, err)
	require.Equal(t, "plainOLD-4711", hist[0].Old["db"].(map[string]any)["password"])

	// A write by a writer without read-secrets is stored sealed and answered masked.
	w, _, err := b.svc.Put(reader, web01, "creds", obj(t, `{"api":["tok-NODE-3"]}`), "", "bob")
	require.NoError(t, err)
	require.Equal(t, []any{"(secret)"}, w.Data["api"])
	require.NotContains(t, tableText(t, b.db), "tok-NODE-3")
	// Saving back what a masked read showed would replace the secret by its mask: refused.
	_, _, err = b.svc.Put(reader, grp, "creds", got0(t, b, reader, grp), "", "bob")
	require.Equal(t, fault.KindUnprocessable, fault.KindOf(err))
	require.Contains(t, err.Error(), "read-secrets")

	// The render: masked for a reader, revealed for the node's read-secrets, different ETags.
	r, err := b.svc.Render(reader, b.res, "web01", false)
	require.NoError(t, err)
	require.Equal(t, []string{"creds"}, r.Secrets)
	require.NotContains(t, string(r.JSON), "hunter2")
	require.Contains(t, string(r.JSON), `"password":"(secret)"`)
	require.Contains(t, string(r.JSON), `"port":8080`)
	full, err := r.Reveal()
	require.NoError(t, err)
	require.Contains(t, string(full.JSON), "hunter2-GROUP")
	require.Contains(t, string(full.JSON), "tok-NODE-3")
	require.NotEqual(t, r.ETag, full.ETag)
	// The replica's row memo keeps the shared rows' text (the group's plain row, the masked
	// shape of its secret one), never a plaintext the reveal opened.
	require.True(t, b.svc.RowMemo().Find([]byte("8080")), "the group's plain row is remembered")
	require.True(t, b.svc.RowMemo().Find([]byte(`"(secret)"`)), "the masked shape is remembered")
	for _, p := range plaintexts {
		require.False(t, b.svc.RowMemo().Find([]byte(p)), "plaintext %s in the row memo", p)
	}
	ex, err := b.svc.Render(reader, b.res, "web01", true)
	require.NoError(t, err)
	eb, _ := json.Marshal(ex)
	require.NotContains(t, string(eb), "hunter2")
	require.NotContains(t, string(eb), "tok-NODE")
	require.Contains(t, string(eb), "group/acme/web", "setBy is kept")

	// node_pillars: one _errors row naming the category, never a value.
	rows := nodePillarRows(t, b.db, "web01")
	require.Len(t, rows, 1)
	require.Contains(t, rows[0]["_errors"].([]any)[0], "creds")
	require.Contains(t, rows[0]["_errors"].([]any)[0], "http_json")

	// Restore of the first entry brings the old secret back, sealed.
	hist, err = b.svc.History(revealer, grp, "creds", 0, 10)
	require.NoError(t, err)
	_, err = b.svc.Restore(reader, grp, "creds", hist[len(hist)-1].ID, "", "carol")
	require.NoError(t, err)
	got, err = b.svc.Get(revealer, grp, "creds")
	require.NoError(t, err)
	require.Equal(t, "plainOLD-4711", got.Data["db"].(map[string]any)["password"])
	require.NotContains(t, tableText(t, b.db), "plainOLD-4711")

	// A sealed value copied to another row does not open there.
	_, err = b.db.Exec(ctx, &db.Query{Name: "t", Text: `UPDATE ` + b.db.Schema() + `.pillars SET sealed =
		(SELECT sealed FROM ` + b.db.Schema() + `.pillars p JOIN ` + b.db.Schema() + `.resources r ON r.id = p.resource_id WHERE r.kind = 'Node' AND p.category = 'creds')
		WHERE category = 'creds' AND resource_id = (SELECT id FROM ` + b.db.Schema() + `.resources WHERE kind = 'Group' AND name = 'web')`})
	require.NoError(t, err)
	_, err = b.svc.Get(revealer, grp, "creds")
	require.ErrorIs(t, err, secret.ErrTampered)
	_, err = b.svc.Get(reader, grp, "creds")
	require.NoError(t, err, "the masked shape is still served")
}

// TestSecretCategoryWithoutKey: a server without a key refuses to make a category secret
// and to write one, naming the flag; masked reads still work; the plaintext needs the key.
func TestSecretCategoryWithoutKey(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)

	keyless := pillar.NewService(b.db)
	_, _, err = keyless.SetCategory(ctx, "other", api.PillarCategoryRequest{Secret: true}, "alice")
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
	require.Contains(t, err.Error(), "--encryption-key-file")
	_, _, err = keyless.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds", obj(t, `{"a":1}`), "", "x")
	require.Equal(t, fault.KindConflict, fault.KindOf(err))
	got, err := keyless.Get(as(t, context.Background(), "pillars:read:*"), pillar.Target{Kind: "node", Node: "web01"}, "creds")
	require.NoError(t, err)
	require.Equal(t, []any{"(secret)", "(secret)"}, got.Data["api"])
	_, err = keyless.Get(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds")
	require.Equal(t, fault.KindConflict, fault.KindOf(err))

	// Another key: the error names the key the value needs.
	other, _ := newKeys(t, 1)
	wrong := pillar.NewService(b.db)
	wrong.UseKeys(other)
	_, err = wrong.Get(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds")
	require.ErrorIs(t, err, secret.ErrMissingKey)
	require.Equal(t, fault.KindUnavailable, fault.KindOf(err))
	require.Contains(t, err.Error(), keys.Primary())
}

// TestSecretCategoryPlainAgain: only read-secrets on every target makes a category plain
// again (it reveals the values to all readers); then rows and history are plaintext.
func TestSecretCategoryPlainAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	_, _, err := b.svc.SetCategory(as(t, ctx, "admin"), "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	err = b.svc.DeleteCategory(as(t, ctx, "admin"), "creds", "alice")
	require.Equal(t, fault.KindConflict, fault.KindOf(err), "a secret category's properties are not deleted")
	_, _, err = b.svc.SetCategory(as(t, ctx, "pillars:write:*"), "creds", api.PillarCategoryRequest{}, "alice")
	require.Equal(t, fault.KindForbidden, fault.KindOf(err))
	require.Contains(t, err.Error(), "pillars:read-secrets:*")
	c, _, err := b.svc.SetCategory(as(t, ctx, "pillars:write:*", "pillars:read-secrets:*"), "creds", api.PillarCategoryRequest{}, "alice")
	require.NoError(t, err)
	require.False(t, c.Secret)
	text := tableText(t, b.db)
	for _, p := range plaintexts {
		require.Contains(t, text, p)
	}
	require.NotContains(t, text, "(secret)")
	got, err := b.svc.Get(as(t, ctx, "pillars:read:*"), pillar.Target{Kind: "node", Node: "web01"}, "creds")
	require.NoError(t, err)
	require.False(t, got.Secret)
	require.Equal(t, []any{"tok-NODE-1", "tok-NODE-2"}, got.Data["api"])
}

// TestSecretRowsFollowARename: a renamed node's secret row and history are sealed again
// under its new name, and open there.
func TestSecretRowsFollowARename(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	b.res.OnRename(b.svc.Renamed)
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	_, err = b.res.Rename(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, "web99")
	require.NoError(t, err)
	got, err := b.svc.Get(ctx, pillar.Target{Kind: "node", Node: "web99"}, "creds")
	require.NoError(t, err)
	require.Equal(t, []any{"tok-NODE-1", "tok-NODE-2"}, got.Data["api"])
	hist, err := b.svc.History(ctx, pillar.Target{Kind: "node", Node: "web99"}, "creds", 0, 10)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, []any{"tok-NODE-1", "tok-NODE-2"}, hist[0].New["api"])
}

// TestPgDumpHoldsNoSecret: a pg_dump of the whole database holds none of the values of a
// secret category, rows and history alike; the control (the same dump before the category
// is made secret) finds them, so the search can fail.
func TestPgDumpHoldsNoSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	bindir, err := pgembed.FindBinaries()
	require.NoError(t, err)
	dump := func() string {
		out, err := exec.CommandContext(ctx, filepath.Join(bindir, "pg_dump"), "--dbname", b.db.URL()).Output()
		require.NoError(t, err)
		return string(out)
	}
	plain := dump()
	for _, p := range plaintexts {
		require.Contains(t, plain, p, "control")
	}
	_, _, err = b.svc.SetCategory(as(t, ctx, "admin"), "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "creds", obj(t, `{"api":["tok-NEW-99"]}`), "", "bob")
	require.NoError(t, err)
	sealed := dump()
	for _, p := range append(plaintexts, "tok-NEW-99") {
		require.False(t, strings.Contains(sealed, p), "the dump holds %s", p)
	}
}

// TestRotationUnderLoad: with the new key first on the ring (the old one still there),
// writers and revealing renders run while RewrapBatch re-wraps every value in small
// batches; every read before, during and after opens and shows a value some writer wrote,
// and afterwards nothing references the old key, so a ring of the new key alone reads it
// all. The control: the new key alone before the rotation cannot open old values.
func TestRotationUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	oldRing, oldKeys := newKeys(t, 1)
	b := secretWorld(t, oldRing)
	_, _, err := b.svc.SetCategory(ctx, "creds", api.PillarCategoryRequest{Secret: true}, "alice")
	require.NoError(t, err)
	const nodes = 12
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("n%02d", i)
		b.mk(t, resource.Ref{Kind: resource.KindNode, Name: name}, node("acme", nil))
		_, err := b.res.AddMember(context.Background(), "acme", "web", name)
		require.NoError(t, err)
		for v := 0; v < 3; v++ { // history entries too
			_, _, err = b.svc.Put(ctx, pillar.Target{Kind: "node", Node: name}, "creds", obj(t, fmt.Sprintf(`{"pw":"v-%s-%d"}`, name, v)), "", "alice")
			require.NoError(t, err)
		}
	}
	newRing, newKeys := newKeys(t, 1)
	_ = newRing
	both, err := secret.NewKeyring(newKeys[0], oldKeys[0])
	require.NoError(t, err)
	svc := pillar.NewService(b.db)
	svc.UseKeys(both)
	onlyNew := pillar.NewService(b.db)
	onlyNew.UseKeys(newRing)
	_, err = onlyNew.Get(ctx, pillar.Target{Kind: "node", Node: "n00"}, "creds")
	require.ErrorIs(t, err, secret.ErrMissingKey, "control: the new key alone cannot open old values before the rotation")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	reads := atomic.Int64{}
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("n%02d", (i*3+w)%nodes)
				if _, _, err := svc.Put(ctx, pillar.Target{Kind: "node", Node: name}, "creds", obj(t, fmt.Sprintf(`{"pw":"w%d-%s-%d"}`, w, name, i)), "", "writer"); err != nil {
					errs <- err
					return
				}
				r, err := svc.Render(ctx, b.res, name, false)
				if err == nil {
					r, err = r.Reveal()
				}
				if err != nil {
					errs <- err
					return
				}
				if !strings.Contains(string(r.JSON), `"pw":"`) || strings.Contains(string(r.JSON), "(secret)") {
					errs <- fmt.Errorf("render of %s: %s", name, r.JSON)
					return
				}
				reads.Add(1)
			}
		}(w)
	}
	require.Eventually(t, func() bool { return reads.Load() >= 3 }, 10*time.Second, time.Millisecond, "reads before the rotation")
	total := 0
	for {
		n, err := svc.RewrapBatch(ctx, 5)
		require.NoError(t, err)
		total += n
		if n == 0 {
			break
		}
	}
	after := reads.Load()
	require.Eventually(t, func() bool { return reads.Load() >= after+3 }, 10*time.Second, time.Millisecond, "reads after the rotation")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Greater(t, total, nodes, "rows and history entries were re-wrapped")
	require.Positive(t, reads.Load())
	counts, err := svc.SealedByKey(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{newKeys[0].ID}, slices.Collect(maps.Keys(counts)), "nothing references the old key")
	// The old key retired: every row and history entry opens with the new key alone.
	for i := 0; i < nodes; i++ {
		tg := pillar.Target{Kind: "node", Node: fmt.Sprintf("n%02d", i)}
		_, err := onlyNew.Get(ctx, tg, "creds")
		require.NoError(t, err)
		_, err = onlyNew.History(ctx, tg, "creds", 0, 100)
		require.NoError(t, err)
	}
	_, err = onlyNew.History(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "creds", 0, 100)
	require.NoError(t, err)
}

func got0(t *testing.T, b *bundle, ctx context.Context, tg pillar.Target) map[string]any {
	t.Helper()
	p, err := b.svc.Get(ctx, tg, "creds")
	require.NoError(t, err)
	return p.Data
}
