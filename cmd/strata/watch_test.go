package main_test

// The watch resume harness (issue 10): concurrent writers on two strata processes on one
// database, a watcher that starts on one replica from a list's resourceVersion, disconnects
// part-way and resumes on the other from the last event it received. The concatenated events
// must be exactly the changes log after the list's version: in order, no gap, no duplicate.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

var watchLogQuery = db.MustParseQueries(fstest.MapFS{"q.sql": {Data: []byte(`
-- name: WatchTestLog
SELECT resource_version, type, name FROM {{schema}}.changes
WHERE kind = $1 AND resource_version > $2 ORDER BY resource_version;
`)}}, "q.sql").Get("WatchTestLog")

// seen is one change: from the log, or as a watch delivered it.
type seen struct {
	RV   int64
	Type string
	Name string
}

// exactly reports the first way got differs from want: a change missing (gap), one repeated
// (duplicate), or one out of order.
func exactly(want, got []seen) error {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			return fmt.Errorf("gap: change %d (%s %s) never arrived", want[i].RV, want[i].Type, want[i].Name)
		case i >= len(want):
			return fmt.Errorf("extra event %d at position %d", got[i].RV, i)
		case got[i] != want[i]:
			if i > 0 && got[i].RV <= got[i-1].RV {
				return fmt.Errorf("duplicate or out of order at position %d: event %d after %d", i, got[i].RV, got[i-1].RV)
			}
			return fmt.Errorf("gap at position %d: expected change %d (%s %s), got %d", i, want[i].RV, want[i].Type, want[i].Name, got[i].RV)
		}
	}
	return nil
}

// eventWait bounds each wait of these tests for a watch event (or a stream's end): one that
// does not come fails the test within it, saying so, instead of running into the test's
// overall deadline with nothing but "context deadline exceeded".
const eventWait = 30 * time.Second

// nextOrEnd returns w's next event or how the stream ended. When nothing arrives within
// eventWait it closes w and fails the test.
func nextOrEnd(t *testing.T, w *client.Watcher) (client.Event, error) {
	t.Helper()
	timer := time.AfterFunc(eventWait, func() { w.Close() })
	ev, err := w.Next()
	if !timer.Stop() {
		require.FailNow(t, "no watch event within "+eventWait.String(), "the stream was closed after waiting (%v)", err)
	}
	return ev, err
}

// readUntil reads non-bookmark events of w into out until stop says so.
func readUntil(t *testing.T, w *client.Watcher, out *[]seen, stop func(seen) bool) {
	t.Helper()
	for {
		ev, err := nextOrEnd(t, w)
		require.NoError(t, err)
		if ev.Type == client.EventBookmark {
			continue
		}
		rv, err := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
		require.NoError(t, err)
		s := seen{rv, ev.Type, ev.Object.Metadata.Name}
		*out = append(*out, s)
		if stop(s) {
			return
		}
	}
}

// TestWatchResumeAcrossReplicas: 24 writers, half on each of two replicas, create, patch and
// delete orgs from a small set of names (so they collide, and transactions commit out of the
// order they drew nothing from); a node is written now and then too (another kind, which the
// watch must not show). A watcher lists on replica A, watches from the list's version, reads
// 40 events and disconnects while the writers go on; it resumes on replica B from its last
// event's version and reads until the newest change. Its events must be exactly the org rows
// of the changes log after the list's version. The control: the same checker rejects the
// sequence with one event dropped and with one repeated.
func TestWatchResumeAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	urls, token, dbURL := replicas(t, 2)
	clients := make([]*client.Client, 2)
	for i, u := range urls {
		c, err := client.New(u, token, nil)
		require.NoError(t, err)
		clients[i] = c
	}
	_, err := clients[0].Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "home"}})
	require.NoError(t, err)
	list, err := clients[0].Orgs().ListAll(ctx, client.ListOptions{})
	require.NoError(t, err)
	from, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	require.NoError(t, err)

	const writers, rounds = 24, 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("writer seed %d", seed)
	var wg sync.WaitGroup
	var okWrites sync.Map
	var attempts atomic.Int64
	for w := range writers {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		c, err := client.New(urls[w%2], token, &http.Client{Transport: tr, Timeout: time.Minute})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			n := 0
			for r := range rounds {
				name := fmt.Sprintf("o%d", rng.IntN(12))
				var err error
				switch rng.IntN(4) {
				case 0, 1:
					_, err = c.Orgs().Replace(ctx, client.Object{Metadata: client.ObjectMeta{Name: name, Labels: map[string]string{"w": strconv.Itoa(w), "r": strconv.Itoa(r)}}})
				case 2:
					_, err = c.Orgs().Patch(ctx, name, []byte(`{"metadata":{"annotations":{"r":"`+strconv.Itoa(r)+`"}}}`))
				default:
					err = c.Orgs().Delete(ctx, name, client.DeleteOptions{})
				}
				if err == nil {
					n++
				}
				attempts.Add(1)
				if r%10 == 0 {
					_, _ = c.Nodes().Replace(ctx, client.Object{Metadata: client.ObjectMeta{Name: fmt.Sprintf("n%d", w)}, Spec: []byte(`{"org":"home"}`)})
				}
			}
			okWrites.Store(w, n)
		}()
	}

	// waitWrites lets the writers make n more attempts, so that the watch about to start
	// has a backlog to catch up before the live feed takes over.
	waitWrites := func(n int64) {
		t.Helper()
		target := min(attempts.Load()+n, writers*rounds)
		require.Eventually(t, func() bool { return attempts.Load() >= target }, time.Minute, time.Millisecond)
	}

	// Part one on replica A: 40 events, then disconnect mid-stream.
	waitWrites(60)
	var got []seen
	wa, err := clients[0].Orgs().Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	readUntil(t, wa, &got, func(seen) bool { return len(got) >= 40 })
	require.NoError(t, wa.Close())
	partA := len(got)
	waitWrites(60)

	// Part two on replica B, from the last event's version, until the newest change.
	wb, err := clients[1].Orgs().Watch(ctx, client.WatchOptions{ResourceVersion: strconv.FormatInt(got[len(got)-1].RV, 10)})
	require.NoError(t, err)
	defer wb.Close()
	wg.Wait()

	d, err := db.Open(ctx, db.Options{URL: dbURL, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer d.Close()
	rows, err := d.Query(ctx, watchLogQuery, "Org", from)
	require.NoError(t, err)
	var want []seen
	for rows.Next() {
		var s seen
		require.NoError(t, rows.Scan(&s.RV, &s.Type, &s.Name))
		want = append(want, s)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Greater(t, len(want), partA, "the writers wrote more than part one read")
	last := want[len(want)-1].RV
	readUntil(t, wb, &got, func(s seen) bool { return s.RV >= last })

	total := 0
	okWrites.Range(func(_, v any) bool { total += v.(int); return true })
	t.Logf("%d acknowledged org writes by %d writers on 2 replicas; %d org changes after the list's version %d, %d read on A then %d on B",
		total, writers, len(want), from, partA, len(got)-partA)
	require.NoError(t, exactly(want, got))

	// The control: the checker sees a dropped and a repeated event.
	dropped := append(append([]seen{}, got[:partA]...), got[partA+1:]...)
	require.ErrorContains(t, exactly(want, dropped), "gap")
	repeated := append(append([]seen{}, got[:partA]...), got[partA-1:]...)
	require.ErrorContains(t, exactly(want, repeated), "duplicate")
}

// TestWatchEndsOnShutdown: SIGTERM ends open watch streams with an ERROR event (503: resume
// elsewhere) instead of holding the graceful shutdown until its timeout; the CLI's
// `strata watch org -o json` prints the events as JSON lines meanwhile.
func TestWatchEndsOnShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token := "strata_" + strings.Repeat("watchShutdownToken", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token, "STRATA_DATABASE_URL=" + pgtest.NewDatabaseURL(t)},
		"--data-dir", dataDir(t), "--shutdown-timeout", "50s")
	c, err := client.New(s.url, token, nil)
	require.NoError(t, err)
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "before"}})
	require.NoError(t, err)

	cmd := exec.CommandContext(ctx, binary, "watch", "org", "-o", "json", "--server", s.url, "--token", token)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the CLI prints the current org")
	var ev client.Event
	require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
	require.Equal(t, "ADDED before", ev.Type+" "+ev.Object.Metadata.Name)

	w, err := c.Orgs().Watch(ctx, client.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	ev, err = nextOrEnd(t, w)
	require.NoError(t, err)
	require.Equal(t, "before", ev.Object.Metadata.Name)
	_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "during"}})
	require.NoError(t, err)
	require.True(t, lines.Scan())
	require.NoError(t, json.Unmarshal(lines.Bytes(), &ev))
	require.Equal(t, "ADDED during", ev.Type+" "+ev.Object.Metadata.Name)

	s.stop(t)
	for {
		ev, err = nextOrEnd(t, w)
		if err != nil {
			break
		}
		require.True(t, ev.Type == client.EventBookmark || ev.Object.Metadata.Name == "during", "%+v", ev)
	}
	var ce *client.Error
	require.ErrorAs(t, err, &ce, "the stream ends with an ERROR event")
	require.Equal(t, http.StatusServiceUnavailable, ce.Status)
	require.NotContains(t, s.stderr.String(), "graceful shutdown incomplete", "no stream held the shutdown up")
	err = cmd.Wait()
	require.Error(t, err, "the CLI reports the ended stream")
}
