package resource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

var watchTestQueries = db.MustParseQueries(fstest.MapFS{"w.sql": {Data: []byte(`
-- name: TestChangesAfter
SELECT resource_version, type, name FROM {{schema}}.changes
WHERE kind = $1 AND resource_version > $2 ORDER BY resource_version;

-- name: TestDropChangesAfter
DELETE FROM {{schema}}.changes WHERE resource_version > $1;

-- name: TestPrevLabels
SELECT type, prev_labels FROM {{schema}}.changes WHERE kind = $1 AND name = $2 ORDER BY resource_version;
`)}}, "w.sql")

// logRow is one change as the log holds it, for comparing with what a watch delivered.
type logRow struct {
	RV   int64
	Type string
	Name string
}

func changesAfter(t *testing.T, d *db.DB, kind string, after int64) []logRow {
	t.Helper()
	rows, err := d.Query(context.Background(), watchTestQueries.Get("TestChangesAfter"), kind, after)
	require.NoError(t, err)
	defer rows.Close()
	out := []logRow{}
	for rows.Next() {
		var r logRow
		require.NoError(t, rows.Scan(&r.RV, &r.Type, &r.Name))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// startHub runs a hub over b's database (LISTENing on a session of it) until the test ends.
func startHub(t *testing.T, b *testBundle, tune func(h *resource.Hub)) *resource.Hub {
	t.Helper()
	h := resource.NewHub(b.svc, func(ctx context.Context) (*db.Session, error) {
		return b.db.OpenSession(ctx, "strata watch test")
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if tune != nil {
		tune(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// collect reads n changes from s (failing after a minute).
func collect(t *testing.T, s *resource.Subscription, n int) []logRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := []logRow{}
	for len(out) < n {
		c, err := s.Next(ctx)
		require.NoError(t, err, "after %d of %d changes", len(out), n)
		out = append(out, logRow{c.RV, c.Type, c.Name})
	}
	return out
}

// TestWatchDeliversExactlyTheLog: a subscription started from a list's version while
// writers run receives exactly the rows of the changes log after that version, for its kind,
// in order: first from the backlog, then from the live feed. Concurrent writers on many
// connections commit out of call order; the hand-off must neither drop nor repeat a change.
// The hub's batch is small so the backlog takes several reads and the hand-off happens while
// changes keep arriving.
func TestWatchDeliversExactlyTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, func(h *resource.Hub) { h.Batch = 7 })
	for i := range 20 {
		_, err := b.svc.Create(ctx, org(fmt.Sprintf("pre-%d", i)), api.Object{})
		require.NoError(t, err)
	}
	list, _, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{})
	require.NoError(t, err)
	from, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	require.NoError(t, err)

	const writers, rounds = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for r := range rounds {
				name := fmt.Sprintf("w%d-%d", w, r%5)
				switch rng.IntN(3) {
				case 0:
					_, _ = b.svc.Create(ctx, org(name), api.Object{})
				case 1:
					_, _ = b.svc.Patch(ctx, org(name), []byte(`{"metadata":{"labels":{"r":"`+strconv.Itoa(r)+`"}}}`))
				default:
					_ = b.svc.Delete(ctx, org(name), "", false)
				}
				if r == rounds/3 && w == 0 {
					// A node (another kind) in between: not the watch's business.
					_, _ = b.svc.Create(ctx, resource.Ref{Kind: "Node", Name: "n1"}, api.Object{Spec: json.RawMessage(`{"org":"pre-1"}`)})
				}
			}
		}()
	}
	// Subscribe while the writers run, after some of their changes.
	time.Sleep(20 * time.Millisecond)
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", from)
	require.NoError(t, err)
	defer sub.Close()
	wg.Wait()
	want := changesAfter(t, b.db, resource.KindOrg, from)
	require.NotEmpty(t, want)
	got := collect(t, sub, len(want))
	require.Equal(t, want, got)
	require.NoError(t, checkExactly(want, got))
}

// checkExactly reports the first difference between the log's rows and a watch's events:
// a missing change (gap), a repeated one (duplicate), or one out of order.
func checkExactly(want, got []logRow) error {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			return fmt.Errorf("gap: change %d (%s %s) never arrived", want[i].RV, want[i].Type, want[i].Name)
		case i >= len(want):
			return fmt.Errorf("extra event %d at position %d", got[i].RV, i)
		case got[i] != want[i]:
			if i > 0 && got[i].RV <= got[i-1].RV {
				return fmt.Errorf("duplicate or out of order: event %d after %d", got[i].RV, got[i-1].RV)
			}
			return fmt.Errorf("gap: expected change %d (%s %s), got %d", want[i].RV, want[i].Type, want[i].Name, got[i].RV)
		}
	}
	return nil
}

// TestCheckExactlyCatchesGapsAndDuplicates is the control of the checker the watch tests
// (and the cross-replica test) rely on: a dropped, a repeated and a swapped event are each
// reported.
func TestCheckExactlyCatchesGapsAndDuplicates(t *testing.T) {
	t.Parallel()
	log := []logRow{{1, "ADDED", "a"}, {2, "MODIFIED", "a"}, {4, "ADDED", "b"}, {7, "DELETED", "a"}}
	require.NoError(t, checkExactly(log, log))
	dropped := append(append([]logRow{}, log[:1]...), log[2:]...)
	require.ErrorContains(t, checkExactly(log, dropped), "gap")
	repeated := append(append([]logRow{}, log[:2]...), log[1:]...)
	require.ErrorContains(t, checkExactly(log, repeated), "duplicate")
	require.Error(t, checkExactly(log, log[:3]))
}

// TestWatchGoneAfterPrune: once changes are pruned, a subscription from before the pruned
// ones is a 410, one from the compaction point is not, and a list of a kind whose changes
// are all pruned reports the compaction point, never 0 or an older version.
func TestWatchGoneAfterPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, nil)
	var rvs []int64
	for _, name := range []string{"a", "b", "c"} {
		o, err := b.svc.Create(ctx, org(name), api.Object{})
		require.NoError(t, err)
		rv, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		rvs = append(rvs, rv)
	}
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", rvs[0]-1)
	require.NoError(t, err, "nothing is pruned yet")
	sub.Close()

	n, err := resource.PruneChanges(ctx, b.db, time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	_, err = h.Subscribe(ctx, resource.KindOrg, "", rvs[0])
	require.Equal(t, fault.KindGone, fault.KindOf(err), "%v", err)
	_, err = h.Subscribe(ctx, resource.KindOrg, "", rvs[2]-1)
	require.Equal(t, fault.KindGone, fault.KindOf(err), "%v", err)
	sub, err = h.Subscribe(ctx, resource.KindOrg, "", rvs[2])
	require.NoError(t, err, "the compaction point itself misses nothing")
	defer sub.Close()

	list, _, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(rvs[2], 10), list.ResourceVersion)
	require.Len(t, list.Items, 3)

	// A later change is delivered to the subscription from the compaction point.
	o, err := b.svc.Create(ctx, org("d"), api.Object{})
	require.NoError(t, err)
	got := collect(t, sub, 1)
	require.Equal(t, o.Metadata.ResourceVersion, strconv.FormatInt(got[0].RV, 10))
}

// TestWatchSlowSubscriberIsEnded: a subscriber that does not read while more changes than
// its buffer arrive is ended with an error after the buffered changes, and the hub goes on
// serving another subscriber that reads.
func TestWatchSlowSubscriberIsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, func(h *resource.Hub) { h.Buffer = 3 })
	start := h.Head()
	slow, err := h.Subscribe(ctx, resource.KindOrg, "", start)
	require.NoError(t, err)
	defer slow.Close()
	fast, err := h.Subscribe(ctx, resource.KindOrg, "", start)
	require.NoError(t, err)
	defer fast.Close()
	// Both go live (nothing to catch up): Next with an expired context hands over.
	for _, s := range []*resource.Subscription{slow, fast} {
		expired, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Next(expired)
		require.ErrorIs(t, err, context.Canceled)
	}
	// Two changes the fast one reads, then two more: the slow one, holding four, is over
	// its buffer of three; the fast one never holds more than two.
	var last string
	for i := range 4 {
		o, err := b.svc.Create(ctx, org(fmt.Sprintf("o%d", i)), api.Object{})
		require.NoError(t, err)
		last = o.Metadata.ResourceVersion
		if i%2 == 1 {
			got := collect(t, fast, 2)
			require.Equal(t, last, strconv.FormatInt(got[1].RV, 10))
		}
	}

	got := collect(t, slow, 3)
	require.Len(t, got, 3)
	// Bounded, so a subscriber that is not ended fails here instead of hanging the test.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	_, err = slow.Next(wctx)
	require.Equal(t, fault.KindUnavailable, fault.KindOf(err), "%v", err)
	require.ErrorContains(t, err, "fell more than 3 events behind")
}

// TestWatchProgressIsComplete: Progress (what a BOOKMARK carries) never claims a version
// whose change the subscriber has not been given.
func TestWatchProgressIsComplete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, nil)
	from := h.Head()
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", from)
	require.NoError(t, err)
	defer sub.Close()
	var rvs []int64
	for i := range 3 {
		o, err := b.svc.Create(ctx, org(fmt.Sprintf("p%d", i)), api.Object{})
		require.NoError(t, err)
		rv, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		rvs = append(rvs, rv)
	}
	require.Less(t, sub.Progress(), rvs[0], "nothing was returned yet")
	got := collect(t, sub, 1)
	require.Equal(t, rvs[0], got[0].RV)
	require.Less(t, sub.Progress(), rvs[1])
	collect(t, sub, 2)
	require.Eventually(t, func() bool { return sub.Progress() >= rvs[2] }, time.Minute, 5*time.Millisecond)
}

// TestWatchProgressNeverGoesBack: once Progress has reported the poller's head (the changes
// after the last one returned were of other kinds), a change of the watched kind queued later
// does not pull it back to the last change returned: a BOOKMARK never carries a version below
// an earlier one. The robustness harness saw 1000030093, then 1000030022, on one stream
// under pause-replica; seen failing before the fix.
func TestWatchProgressNeverGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, nil)
	from := h.Head()
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", from)
	require.NoError(t, err)
	defer sub.Close()
	// A change of another kind: the head moves past it, nothing is queued for Orgs.
	_, err = b.svc.Create(ctx, org("acme"), api.Object{})
	require.NoError(t, err)
	got := collect(t, sub, 1)
	n, err := b.svc.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: "n1"}, api.Object{Spec: json.RawMessage(`{"org":"acme"}`)})
	require.NoError(t, err)
	nodeRV, _ := strconv.ParseInt(n.Metadata.ResourceVersion, 10, 64)
	require.Eventually(t, func() bool { return sub.Progress() >= nodeRV }, time.Minute, 5*time.Millisecond)
	reported := sub.Progress()
	require.Greater(t, reported, got[0].RV)
	// Now an Org change is queued and not yet taken.
	o, err := b.svc.Create(ctx, org("beta"), api.Object{})
	require.NoError(t, err)
	orgRV, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	require.Eventually(t, func() bool { return h.Head() >= orgRV }, time.Minute, 5*time.Millisecond)
	require.GreaterOrEqual(t, sub.Progress(), reported, "progress went back while a change waited")
	require.Less(t, sub.Progress(), orgRV, "the waiting change is not claimed")
	require.Equal(t, orgRV, collect(t, sub, 1)[0].RV)
}

// TestEventForSelector: with a selector, entering is ADDED, leaving is DELETED, staying is
// MODIFIED and never matching sends nothing; a deletion is sent only for a matching object.
func TestEventForSelector(t *testing.T) {
	t.Parallel()
	sel, err := metadata.ParseSelector("env=prod")
	require.NoError(t, err)
	prod, dev := map[string]string{"env": "prod"}, map[string]string{"env": "dev"}
	ch := func(typ string, now, prev map[string]string) resource.Change {
		return resource.Change{Type: typ, Object: api.Object{Metadata: api.ObjectMeta{Labels: now}}, PrevLabels: prev}
	}
	for _, tc := range []struct {
		c    resource.Change
		want string
	}{
		{ch("ADDED", prod, nil), "ADDED"},
		{ch("ADDED", dev, nil), ""},
		{ch("MODIFIED", prod, prod), "MODIFIED"},
		{ch("MODIFIED", prod, dev), "ADDED"},
		{ch("MODIFIED", dev, prod), "DELETED"},
		{ch("MODIFIED", dev, dev), ""},
		{ch("MODIFIED", dev, map[string]string{}), ""},
		{ch("MODIFIED", prod, nil), "MODIFIED"}, // prev unknown (older release)
		{ch("DELETED", prod, prod), "DELETED"},
		{ch("DELETED", dev, dev), ""},
	} {
		typ, ok := resource.EventFor(tc.c, sel)
		require.Equal(t, tc.want != "", ok, "%+v", tc.c)
		require.Equal(t, tc.want, typ, "%+v", tc.c)
	}
	typ, ok := resource.EventFor(ch("MODIFIED", dev, prod), metadata.Selector{})
	require.True(t, ok)
	require.Equal(t, "MODIFIED", typ, "without a selector every change is sent as it is")
}

// TestChangesKeepPrevLabels: the change rows carry the labels before each change (NULL for
// a creation), which selector watches need.
func TestChangesKeepPrevLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.svc.Create(ctx, org("x"), api.Object{Metadata: api.ObjectMeta{Labels: map[string]string{"env": "prod"}}})
	require.NoError(t, err)
	_, err = b.svc.Patch(ctx, org("x"), []byte(`{"metadata":{"labels":{"env":"dev"}}}`))
	require.NoError(t, err)
	require.NoError(t, b.svc.Delete(ctx, org("x"), "", false))
	rows, err := b.db.Query(ctx, watchTestQueries.Get("TestPrevLabels"), resource.KindOrg, "x")
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var typ string
		var prev []byte
		require.NoError(t, rows.Scan(&typ, &prev))
		got = append(got, typ+" "+string(prev))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"ADDED ", `MODIFIED {"env": "prod"}`, `DELETED {"env": "dev"}`}, got)
}

// TestListResourceVersionIsItsSnapshot: lists racing with writers. For every list, replaying
// the changes log up to the list's resourceVersion gives exactly the list's items (names and
// versions): the version never covers a change the items lack, and the items never hold a
// change after it. Read in two statements, the version and the items came from different
// moments and this failed.
func TestListResourceVersionIsItsSnapshot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := setup(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; ; r++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("s%d-%d", w, r%4)
				switch r % 3 {
				case 0:
					_, _ = b.svc.Create(ctx, org(name), api.Object{})
				case 1:
					_, _ = b.svc.Patch(ctx, org(name), []byte(`{"metadata":{"labels":{"k":"`+strconv.Itoa(r)+`"}}}`))
				default:
					_ = b.svc.Delete(ctx, org(name), "", false)
				}
			}
		}()
	}
	var lists []api.ObjectList
	for range 150 {
		l, _, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Filter: auth.Filter{All: true}})
		require.NoError(t, err)
		lists = append(lists, l)
	}
	close(stop)
	wg.Wait()
	log := changesAfter(t, b.db, resource.KindOrg, 0)
	for _, l := range lists {
		rv, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		require.NoError(t, err)
		want := map[string]string{}
		for _, c := range log {
			if c.RV > rv {
				break
			}
			if c.Type == "DELETED" {
				delete(want, c.Name)
			} else {
				want[c.Name] = strconv.FormatInt(c.RV, 10)
			}
		}
		got := map[string]string{}
		for _, o := range l.Items {
			got[o.Metadata.Name] = o.Metadata.ResourceVersion
		}
		require.Equal(t, want, got, "the list at resourceVersion %d", rv)
	}
}

// TestWatchPollerBehindPrune: when changes the poller never read are pruned before it reads
// them (it was away longer than the retention), the subscribers behind the compaction point
// are ended with 410 — they may have missed changes — and the poller goes on from there: a
// subscription from the compaction point receives the next change.
func TestWatchPollerBehindPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h := startHub(t, b, nil)
	start := h.Head()
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", start)
	require.NoError(t, err)
	defer sub.Close()
	expired, cancel := context.WithCancel(ctx)
	cancel()
	_, err = sub.Next(expired) // live: nothing to catch up
	require.ErrorIs(t, err, context.Canceled)

	// Two orgs created and their changes pruned in one transaction: the poller, woken by
	// the commit, finds the compaction point past everything it has read.
	var last int64
	require.NoError(t, b.db.InTx(ctx, func(tx *db.Tx) error {
		txCtx := db.WithTx(ctx, tx)
		for _, n := range []string{"a", "b"} {
			o, err := b.svc.Create(txCtx, org(n), api.Object{})
			if err != nil {
				return err
			}
			last, _ = strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
		}
		_, err := tx.Exec(ctx, watchTestQueries.Get("TestDropChangesAfter"), start)
		return err
	}))
	waitCtx, done := context.WithTimeout(ctx, time.Minute)
	defer done()
	_, err = sub.Next(waitCtx)
	require.Equal(t, fault.KindGone, fault.KindOf(err), "%v", err)

	later, err := h.Subscribe(ctx, resource.KindOrg, "", last)
	require.NoError(t, err, "the compaction point misses nothing")
	defer later.Close()
	o, err := b.svc.Create(ctx, org("c"), api.Object{})
	require.NoError(t, err)
	got := collect(t, later, 1)
	require.Equal(t, o.Metadata.ResourceVersion, strconv.FormatInt(got[0].RV, 10))
}

// TestEventInOrg: with an org (a node's spec.org, Kind.OrgMember), moving in is ADDED, moving
// out is DELETED, changing inside is MODIFIED and changing elsewhere sends nothing; an
// unknown org before (a change an older release recorded) counts as in the org; with a
// selector too an object must meet both.
func TestEventInOrg(t *testing.T) {
	t.Parallel()
	sel, err := metadata.ParseSelector("env=prod")
	require.NoError(t, err)
	ch := func(typ, now string, prev *string, labels map[string]string) resource.Change {
		return resource.Change{Type: typ, PrevOrg: prev, PrevLabels: labels, Object: api.Object{
			Metadata: api.ObjectMeta{Labels: labels}, Spec: json.RawMessage(`{"org":"` + now + `"}`)}}
	}
	acme, globex := "acme", "globex"
	prod := map[string]string{"env": "prod"}
	for _, tc := range []struct {
		c    resource.Change
		sel  metadata.Selector
		want string
	}{
		{ch("ADDED", "acme", nil, nil), metadata.Selector{}, "ADDED"},
		{ch("ADDED", "globex", nil, nil), metadata.Selector{}, ""},
		{ch("MODIFIED", "acme", &acme, nil), metadata.Selector{}, "MODIFIED"},
		{ch("MODIFIED", "acme", &globex, nil), metadata.Selector{}, "ADDED"},
		{ch("MODIFIED", "globex", &acme, nil), metadata.Selector{}, "DELETED"},
		{ch("MODIFIED", "globex", &globex, nil), metadata.Selector{}, ""},
		{ch("MODIFIED", "globex", nil, nil), metadata.Selector{}, "DELETED"}, // prev unknown
		{ch("DELETED", "acme", nil, nil), metadata.Selector{}, "DELETED"},
		{ch("DELETED", "globex", nil, nil), metadata.Selector{}, ""},
		{ch("MODIFIED", "acme", &globex, prod), sel, "ADDED"},
		{ch("MODIFIED", "acme", &acme, map[string]string{}), sel, ""},
		{ch("MODIFIED", "globex", &acme, prod), sel, "DELETED"},
	} {
		typ, ok := resource.EventIn(tc.c, tc.sel, "org", "acme")
		require.Equal(t, tc.want != "", ok, "%+v", tc.c)
		require.Equal(t, tc.want, typ, "%+v", tc.c)
	}
	typ, ok := resource.EventIn(ch("MODIFIED", "globex", &globex, nil), metadata.Selector{}, "org", "")
	require.True(t, ok)
	require.Equal(t, "MODIFIED", typ, "without an org every change is sent as it is")
}
