package resource_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/resource"
)

var versionTestQueries = db.MustParseQueries(fstest.MapFS{"v.sql": {Data: []byte(`
-- name: TestLastDrawn
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {{schema}}.resource_version_seq;

-- name: TestSettle
INSERT INTO {{schema}}.changes (resource_version, kind, org, name, type, object)
VALUES ($1, '', '', '', 'GAP', '{}');

-- name: TestChangeType
SELECT type, name FROM {{schema}}.changes WHERE resource_version = $1;
`)}}, "v.sql")

// TestVersionInFlightHoldsReaders is the rule that replaced the commit-order lock: while a
// writer holds a version uncommitted, no version at or above it is visible to a list, a
// watch or the change poller, even though a later writer has committed a higher one. Writer
// A creates org a and holds its transaction open; writer B creates org b (a higher version)
// and commits. While A is open the poller's head stays below A's version, the watch delivers
// nothing, and a list does not answer; once A commits, the watch delivers a then b and the
// list holds both. The control reads as releases before migration 0015 did (every visible
// version at face value, resource.ExposeGaps) and is seen breaking the rule.
func TestVersionInFlightHoldsReaders(t *testing.T) {
	t.Parallel()
	require.Empty(t, inFlightViolations(t, false))
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		v := inFlightViolations(t, true)
		require.NotEmpty(t, v, "taking visible versions at face value must break the rule")
		t.Logf("the control broke the rule as expected: %v", v)
	})
}

func inFlightViolations(t *testing.T, expose bool) []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := setup(t)
	if expose {
		resource.ExposeGaps(b.svc)
	}
	h := startHub(t, b, nil)
	all := resource.ListOptions{Filter: auth.Filter{All: true}}
	start, _, err := b.svc.List(ctx, resource.KindOrg, "", all)
	require.NoError(t, err)
	from, err := strconv.ParseInt(start.ResourceVersion, 10, 64)
	require.NoError(t, err)
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", from)
	require.NoError(t, err)
	defer sub.Close()

	stamped := make(chan int64, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	committedA := make(chan error, 1)
	go func() {
		committedA <- b.db.InTx(ctx, func(tx *db.Tx) error {
			o, err := b.svc.Create(db.WithTx(ctx, tx), org("a"), api.Object{})
			if err != nil {
				return err
			}
			rv, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			stamped <- rv
			<-release
			return nil
		})
	}()
	var rvA int64
	select {
	case rvA = <-stamped:
	case err := <-committedA:
		t.Fatalf("writer A ended early: %v", err)
	}
	ob, err := b.svc.Create(ctx, org("b"), api.Object{})
	require.NoError(t, err)
	rvB, _ := strconv.ParseInt(ob.Metadata.ResourceVersion, 10, 64)
	require.Greater(t, rvB, rvA)

	var violations []string
	type listed struct {
		l   api.ObjectList
		err error
	}
	lists := make(chan listed, 1)
	go func() {
		l, _, err := b.svc.List(ctx, resource.KindOrg, "", all)
		lists <- listed{l, err}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	c, err := sub.Next(wctx)
	wcancel()
	if err == nil {
		violations = append(violations, fmt.Sprintf("the watch delivered version %d while %d was in flight", c.RV, rvA))
	}
	if head := h.Head(); head >= rvA {
		violations = append(violations, fmt.Sprintf("the poller's head reached %d while %d was in flight", head, rvA))
	}
	var early *listed
	select {
	case l := <-lists:
		require.NoError(t, l.err)
		early = &l
		if n := names(l.l); len(n) == 0 || n[0] != "a" {
			violations = append(violations, fmt.Sprintf("a list answered version %s without org a, whose version %d was in flight", l.l.ResourceVersion, rvA))
		}
	default:
	}

	free()
	require.NoError(t, <-committedA)
	var l listed
	if early != nil {
		l = *early
	} else {
		l = <-lists
	}
	require.NoError(t, l.err)
	if rv, _ := strconv.ParseInt(l.l.ResourceVersion, 10, 64); rv >= rvB && !equalNames([]string{"a", "b"}, names(l.l)) {
		violations = append(violations, fmt.Sprintf("the list at version %d holds %v, not [a b]", rv, names(l.l)))
	}
	var got []int64
	if err == nil {
		got = append(got, c.RV) // delivered while A was in flight
	}
	for len(got) < 2 {
		nctx, ncancel := context.WithTimeout(ctx, 3*time.Second)
		c2, err2 := sub.Next(nctx)
		ncancel()
		if err2 != nil {
			break
		}
		got = append(got, c2.RV)
	}
	if !slicesEqual(got, []int64{rvA, rvB}) {
		violations = append(violations, fmt.Sprintf("the watch delivered versions %v, not [%d %d]", got, rvA, rvB))
	}
	return violations
}

func equalNames(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func slicesEqual(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestStampDrawsAgainWhenSettled: when a reader settles a number its writer has drawn but not
// yet inserted (a GAP row takes it first), the writer's insert finds it taken and the write
// draws again instead of failing or overwriting. The settle is made deterministic here by
// taking the next number before the write draws it, for a change and for a deletion.
func TestStampDrawsAgainWhenSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	settleNext := func() int64 {
		var last int64
		require.NoError(t, b.db.QueryRow(ctx, versionTestQueries.Get("TestLastDrawn")).Scan(&last))
		_, err := b.db.Exec(ctx, versionTestQueries.Get("TestSettle"), last+1)
		require.NoError(t, err)
		return last + 1
	}
	typeAt := func(rv int64) string {
		var typ, name string
		require.NoError(t, b.db.QueryRow(ctx, versionTestQueries.Get("TestChangeType"), rv).Scan(&typ, &name))
		return typ + " " + name
	}

	taken := settleNext()
	o, err := b.svc.Create(ctx, org("x"), api.Object{})
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(taken+1, 10), o.Metadata.ResourceVersion, "the write drew the next number")
	require.Equal(t, "GAP ", typeAt(taken))
	require.Equal(t, "ADDED x", typeAt(taken+1))
	added := taken + 1
	got, err := b.svc.Get(ctx, org("x"))
	require.NoError(t, err)
	require.Equal(t, o.Metadata.ResourceVersion, got.Metadata.ResourceVersion)

	// A PATCH sends its stamp with its COMMIT: the taken number fails its transaction, and
	// the whole write runs again, once — its label is written with the second version only.
	taken = settleNext()
	p, err := b.svc.Patch(ctx, org("x"), []byte(`{"metadata": {"labels": {"tier": "gold"}}}`))
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(taken+1, 10), p.Metadata.ResourceVersion, "the PATCH drew the next number")
	require.Equal(t, "GAP ", typeAt(taken))
	require.Equal(t, "MODIFIED x", typeAt(taken+1))
	modified := taken + 1
	got, err = b.svc.Get(ctx, org("x"))
	require.NoError(t, err)
	require.Equal(t, p.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
	require.Equal(t, map[string]string{"tier": "gold"}, got.Metadata.Labels)
	require.Equal(t, p.Metadata.UpdatedAt, got.Metadata.UpdatedAt)

	taken = settleNext()
	require.NoError(t, b.svc.Delete(ctx, org("x"), "", false))
	require.Equal(t, "GAP ", typeAt(taken))
	require.Equal(t, "DELETED x", typeAt(taken+1))

	// A watch over all of it sees the three changes, not the GAP rows.
	h := startHub(t, b, nil)
	sub, err := h.Subscribe(ctx, resource.KindOrg, "", 0)
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, []logRow{{added, "ADDED", "x"}, {modified, "MODIFIED", "x"}, {taken + 1, "DELETED", "x"}}, collect(t, sub, 3))
}

// TestWatchChainsAcrossReplicasEqualTheLog: writers on two replicas (two services with pools
// and change pollers of their own over one database) create, relabel and delete objects
// concurrently, so versions commit out of order all the time, while watchers hop between the
// replicas: each reads a random number of events, closes its watch and resumes on the other
// replica from the last version it received. Each watcher's events, concatenated, equal the
// changes log after its starting list exactly: nothing skipped, repeated or reordered.
func TestWatchChainsAcrossReplicasEqualTheLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := setup(t)
	second, err := db.Open(ctx, db.Options{URL: b.db.URL(), MaxConns: 8, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(second.Close)
	replicas := []*testBundle{b, {db: second, svc: resource.NewService(second)}}
	hubs := []*resource.Hub{startHub(t, replicas[0], nil), startHub(t, replicas[1], nil)}

	const writers, each, watchers = 8, 60, 4
	all := resource.ListOptions{Filter: auth.Filter{All: true}}
	type chain struct {
		from   int64
		events []logRow
		hops   int
	}
	chains := make([]*chain, watchers)
	written := make(chan struct{})
	var final int64 // the newest Org change, set before written closes
	var wg sync.WaitGroup
	for w := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			r := w % 2
			l, _, err := replicas[r].svc.List(ctx, resource.KindOrg, "", all)
			if err != nil {
				t.Error(err)
				return
			}
			c := &chain{}
			c.from, _ = strconv.ParseInt(l.ResourceVersion, 10, 64)
			chains[w] = c
			cursor := c.from
			for {
				sub, err := hubs[r].Subscribe(ctx, resource.KindOrg, "", cursor)
				if err != nil {
					t.Error(err)
					return
				}
				for n := 1 + rng.IntN(15); n > 0; n-- {
					select {
					case <-written:
						if cursor >= final {
							sub.Close()
							return
						}
					default:
					}
					nctx, ncancel := context.WithTimeout(ctx, 200*time.Millisecond)
					ch, err := sub.Next(nctx)
					ncancel()
					if err != nil {
						if ctx.Err() != nil {
							t.Error(ctx.Err())
							sub.Close()
							return
						}
						continue
					}
					c.events = append(c.events, logRow{ch.RV, ch.Type, ch.Name})
					cursor = ch.RV
				}
				sub.Close()
				c.hops++
				r = 1 - r
			}
		}()
	}
	var ww sync.WaitGroup
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			svc := replicas[w%2].svc
			for i := range each {
				name := fmt.Sprintf("w%d-%d", w, i%5)
				var err error
				switch i % 3 {
				case 0:
					_, err = svc.Create(ctx, org(name), api.Object{})
				case 1:
					_, err = svc.Patch(ctx, org(name), []byte(`{"metadata":{"labels":{"i":"`+strconv.Itoa(i)+`"}}}`))
				default:
					err = svc.Delete(ctx, org(name), "", false)
				}
				if err != nil && ctx.Err() != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	ww.Wait()
	logAll := changesAfter(t, b.db, resource.KindOrg, 0)
	require.NotEmpty(t, logAll)
	final = logAll[len(logAll)-1].RV
	close(written)
	wg.Wait()
	require.False(t, t.Failed())
	for w, c := range chains {
		want := changesAfter(t, b.db, resource.KindOrg, c.from)
		require.Greater(t, len(want), writers*each/4, "watcher %d started before most writes", w)
		require.Equal(t, want, c.events, "watcher %d (from %d, %d hops)", w, c.from, c.hops)
		require.Greater(t, c.hops, 2, "watcher %d resumed several times", w)
	}
}

// TestListPagesAreExactUnderWriters: a page of a list read while writers commit out of order
// is patched with the changes its snapshot missed within its own name range: replaying the log
// up to the page's version gives exactly the page's items among the names after the previous
// page and up to the page's last name (the continue point; a change that removed an item may
// leave the page short, as a Kubernetes page may be, and the next page goes on after it), and
// never more than the limit.
func TestListPagesAreExactUnderWriters(t *testing.T) {
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
				name := fmt.Sprintf("p%d-%d", r%5, w)
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
	type page struct {
		after, last string
		list        api.ObjectList
	}
	var pages []page
	for range 120 {
		after := fmt.Sprintf("p%d", len(pages)%5)
		l, last, err := b.svc.List(ctx, resource.KindOrg, "", resource.ListOptions{Limit: 3, After: after, Filter: auth.Filter{All: true}})
		require.NoError(t, err)
		pages = append(pages, page{after, last, l})
	}
	close(stop)
	wg.Wait()
	log := changesAfter(t, b.db, resource.KindOrg, 0)
	for _, p := range pages {
		rv, err := strconv.ParseInt(p.list.ResourceVersion, 10, 64)
		require.NoError(t, err)
		state := map[string]string{}
		for _, c := range log {
			if c.RV > rv {
				break
			}
			if c.Type == "DELETED" {
				delete(state, c.Name)
			} else {
				state[c.Name] = strconv.FormatInt(c.RV, 10)
			}
		}
		var names []string
		for n := range state {
			if n > p.after && (p.last == "" || n <= p.last) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		require.LessOrEqual(t, len(p.list.Items), 3, "never more than the limit")
		var got []string
		for _, o := range p.list.Items {
			got = append(got, o.Metadata.Name)
			require.Equal(t, state[o.Metadata.Name], o.Metadata.ResourceVersion, "page after %s at %d: %s's version", p.after, rv, o.Metadata.Name)
		}
		require.Equal(t, names, got, "the page after %q at version %d", p.after, rv)
	}
}
