package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/pillar/sls"
	"github.com/stratahq/strata/internal/resource"
)

// TestSecretTypedWriterLearnsNothing: a writer without read-secrets on a typed secret
// category gets no value back from the kind — a restore of an old value the schema now
// refuses names the field and the rule, never the value (the same refusal quotes it to a
// writer who may read it: the control); and binding a secret category to a kind, which tells
// row by row whether values pass a schema, needs pillars:read-secrets:*.
func TestSecretTypedWriterLearnsNothing(t *testing.T) {
	t.Parallel()
	b := setupTyped(t)
	keys, _ := newKeys(t, 1)
	b.svc.UseKeys(keys)
	admin := principal(t, context.Background(), "admin")
	_, err := b.register(t, ntpSchema(17, "number", `"key":{"type":"string"}`))
	require.NoError(t, err)
	_, _, err = b.svc.Put(admin, web02, "ntp", obj(t, `{"servers":["a"],"key":"hunter2-OLD"}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.Put(admin, web02, "ntp", obj(t, `{"servers":["a"],"key":"abc123"}`), "", "t")
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(admin, "ntp", api.PillarCategoryRequest{Secret: true}, "t")
	require.NoError(t, err)

	writer := principal(t, context.Background(), "pillars:read:*", "pillars:write:*", "kinds:write:*", "kinds:read:*", "resources:read:*")
	_, _, err = b.svc.SetCategory(writer, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula", Secret: true}, "t")
	fe := faultOf(t, err, fault.KindForbidden)
	require.Contains(t, fe.Detail, "pillars:read-secrets:*")
	_, _, err = b.svc.SetCategory(admin, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula", Secret: true}, "t")
	require.NoError(t, err)
	_, err = b.register(t, ntpSchema(17, "number", `"key":{"type":"string","pattern":"^[a-f0-9]+$"}`))
	require.NoError(t, err)

	hist, err := b.svc.History(admin, web02, "ntp", 0, 10)
	require.NoError(t, err)
	first := hist[len(hist)-1].ID
	_, err = b.svc.Restore(writer, web02, "ntp", first, "", "t")
	fe = faultOf(t, err, fault.KindUnprocessable)
	require.NotContains(t, err.Error(), "hunter2")
	require.NotContains(t, fmt.Sprint(fe.Fields), "hunter2")
	require.Equal(t, "/key", fe.Fields[0].Field)
	_, err = b.svc.Restore(admin, web02, "ntp", first, "", "t")
	fe = faultOf(t, err, fault.KindUnprocessable)
	require.Contains(t, fmt.Sprint(fe.Fields), "hunter2-OLD", "control: a writer who may read it is told the value")
}

// TestRenameWaitsForCategoryConversion: a node rename takes the keys of its rows'
// categories, so it waits while a conversion (or a binding) of one of them holds its key
// exclusively — the conversion sealed rows under the name it read, and the rename then finds
// and re-seals them — and proceeds once the key is free. Without the key the rename would run
// past the conversion, whose rows would stay bound to the old name for good.
func TestRenameWaitsForCategoryConversion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	b.res.OnRename(b.svc.Renamed)
	held := make(chan struct{})
	release := make(chan struct{})
	convDone := make(chan error, 1)
	go func() {
		convDone <- b.db.InTx(ctx, func(tx *db.Tx) error {
			if _, err := tx.Exec(ctx, &db.Query{Name: "t", Text: `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/pillar-category/' || $2, 0))`}, b.db.Schema(), "creds"); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	renamed := make(chan error, 1)
	go func() {
		_, err := b.res.Rename(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, "web99")
		renamed <- err
	}()
	select {
	case err := <-renamed:
		close(release) // let the conversion end, or the test would hang instead of failing
		<-convDone
		t.Fatalf("the rename ran past a conversion holding the category's key (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-convDone)
	require.NoError(t, <-renamed)
	got, err := b.svc.Get(as(t, ctx, "admin"), pillar.Target{Kind: "node", Node: "web99"}, "creds")
	require.NoError(t, err)
	require.Equal(t, []any{"tok-NODE-1", "tok-NODE-2"}, got.Data["api"])
}

// TestSecretImportDryRunChangesNothing: a dry run of an import holding decrypted PGP values
// plans the category secret and leaves it as it was; the real import makes it secret.
func TestSecretImportDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	keys, _ := newKeys(t, 1)
	b := secretWorld(t, keys)
	plan := sls.Plan{Env: "base", Unsupported: []sls.Unsupported{}, Rows: []sls.Row{{
		Target: sls.Target{Kind: "global", Match: "*"}, Category: "db", Sources: []string{"db.sls"}, Secret: true,
		Data: map[string]any{"password": "gpg-PLAIN"},
	}}}
	rep, err := b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{DryRun: true}, "t")
	require.NoError(t, err)
	require.True(t, rep.Rows[0].Secret)
	_, err = b.svc.GetCategory(ctx, "db")
	require.Equal(t, fault.KindNotFound, fault.KindOf(err), "the dry run left no trace")
	_, err = b.svc.Import(ctx, b.res, plan, pillar.ImportOptions{}, "t")
	require.NoError(t, err)
	c, err := b.svc.GetCategory(ctx, "db")
	require.NoError(t, err)
	require.True(t, c.Secret)
	require.NotContains(t, tableText(t, b.db), "gpg-PLAIN")
}

// TestSyncKeepsSecretsSecret: a stream from an installation where a category is plain never
// makes it plain here, and its plain history entries are sealed on arrival.
func TestSyncKeepsSecretsSecret(t *testing.T) {
	t.Parallel()
	ctx := as(t, context.Background(), "admin")
	a := setupTyped(t)
	_, err := a.register(t, ntpV1)
	require.NoError(t, err)
	_, _, err = a.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula"}, "t")
	require.NoError(t, err)
	for _, v := range []string{`{"servers":["sync-OLD"]}`, `{"servers":["sync-NEW"]}`} {
		_, _, err = a.svc.Put(ctx, web02, "ntp", obj(t, v), "", "alice")
		require.NoError(t, err)
	}
	recs := syncStream(t, a)

	b := emptyTyped(t)
	keys, _ := newKeys(t, 1)
	b.svc.UseKeys(keys)
	_, err = b.register(t, ntpV1)
	require.NoError(t, err)
	_, _, err = b.svc.SetCategory(ctx, "ntp", api.PillarCategoryRequest{Kind: "NtpFormula", Secret: true}, "t")
	require.NoError(t, err)
	_, err = b.svc.SyncImport(ctx, b.res, recs, false, auth.AuditActor{Actor: "sync"})
	require.NoError(t, err)
	c, err := b.svc.GetCategory(ctx, "ntp")
	require.NoError(t, err)
	require.True(t, c.Secret, "the stream's plain category did not make it plain here")
	text := tableText(t, b.db)
	require.NotContains(t, text, "sync-OLD")
	require.NotContains(t, text, "sync-NEW")
	hist, err := b.svc.History(ctx, web02, "ntp", 0, 10)
	require.NoError(t, err)
	require.NotEmpty(t, hist)
	hb, _ := json.Marshal(hist)
	require.Contains(t, string(hb), "sync-OLD", "the sealed history opens for a reader who may read it")
}
