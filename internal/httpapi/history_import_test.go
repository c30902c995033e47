package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
)

// TestSyncImportMarksHistory is finding 8(a) of issue 27: a sync import (POST
// /v1/pillars:import?format=ndjson) inserted history entries claiming any actor and date —
// "alice" in 2001 — indistinguishable from real ones, and with no audit record when the row
// itself was unchanged. Now every entry an import adds carries importedBy (the importing
// token) and importedAt (when), shown by the history API and the console beside the claimed
// actor and date, and each row whose history an import extended has a pillar.history.import
// audit record, the row unchanged or not. A dry run and a second import of the same stream
// add neither. Seen failing before the fix (no importedBy, no audit record).
func TestSyncImportMarksHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 201, b.do(t, "PUT", "/v1/pillars/global/app", b.admin, strings.NewReader(`{"port":80}`)).status)
	_, syncer, err := b.tokens.Create(context.Background(), auth.AuditActor{Actor: "test"}, auth.CreateParams{Name: "syncer", Scopes: []string{"pillars:*:*"}})
	require.NoError(t, err)

	claimed := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	stream := strings.Join([]string{
		`{"type":"header","version":1}`,
		`{"type":"row","target":"global","category":"app","data":{"port":80},"history":[` +
			`{"revision":1,"old":null,"new":{"port":1},"actor":"alice","at":"2001-02-03T04:05:06Z"}]}`,
	}, "\n")
	importStream := func(query string) api.PillarSyncReport {
		t.Helper()
		r := b.do(t, "POST", "/v1/pillars:import?format=ndjson"+query, syncer, strings.NewReader(stream), "Content-Type", "application/x-ndjson")
		require.Equal(t, 200, r.status, string(r.body))
		var rep api.PillarSyncReport
		require.NoError(t, json.Unmarshal(r.body, &rep))
		return rep
	}
	historyImports := func() []api.AuditRecord {
		t.Helper()
		r := b.do(t, "GET", "/v1/audit?action=pillar.history.import", b.admin, nil)
		require.Equal(t, 200, r.status, string(r.body))
		var audit api.AuditList
		require.NoError(t, json.Unmarshal(r.body, &audit))
		return audit.Items
	}

	dry := importStream("&dryRun=true")
	require.Equal(t, 1, dry.Items[0].History)
	require.Empty(t, historyImports(), "a dry run records nothing")

	before := time.Now().Add(-time.Minute)
	rep := importStream("")
	require.Equal(t, "unchanged", rep.Items[0].Action, "the row itself is as stored")
	require.Equal(t, 1, rep.Items[0].History)

	r := b.do(t, "GET", "/v1/pillars/global/app/history", b.admin, nil)
	require.Equal(t, 200, r.status, string(r.body))
	var hist struct {
		Items []api.PillarChange `json:"items"`
	}
	require.NoError(t, json.Unmarshal(r.body, &hist))
	require.Len(t, hist.Items, 2)
	var imported, own api.PillarChange
	for _, h := range hist.Items {
		if h.Actor == "alice" {
			imported = h
		} else {
			own = h
		}
	}
	require.Equal(t, claimed, imported.At.UTC(), "the claimed date is kept, as claimed")
	require.True(t, strings.HasPrefix(imported.ImportedBy, "syncer ("), "who imported the entry (the token's actor): %q", imported.ImportedBy)
	require.NotNil(t, imported.ImportedAt)
	require.True(t, imported.ImportedAt.After(before) && imported.ImportedAt.Before(time.Now().Add(time.Minute)), "imported at %v", imported.ImportedAt)
	require.Empty(t, own.ImportedBy, "the installation's own entries carry no import marker")
	require.Nil(t, own.ImportedAt)
	require.NotContains(t, string(r.body), `"importedBy":""`)

	recs := historyImports()
	require.Len(t, recs, 1, "one record for the row whose history the import extended, though the row was unchanged")
	require.Equal(t, "global/app", recs[0].Target)
	require.Equal(t, imported.ImportedBy, recs[0].Actor)
	var detail struct {
		Entries   int     `json:"entries"`
		Revisions []int64 `json:"revisions"`
	}
	require.NoError(t, json.Unmarshal(recs[0].Detail, &detail))
	require.Equal(t, 1, detail.Entries)
	require.Equal(t, []int64{1}, detail.Revisions)

	again := importStream("")
	require.Zero(t, again.Items[0].History)
	require.Len(t, historyImports(), 1, "an import that adds no entry records nothing")

	// The console shows the marker beside the claimed actor.
	cc := newConsoleClient(t, b.srv.URL)
	cc.signIn(b.admin)
	status, _, page := cc.get("/ui/pillar?target=global&category=app")
	require.Equal(t, 200, status)
	require.Contains(t, page, "alice")
	require.Contains(t, page, "imported by syncer")
}
