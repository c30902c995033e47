package resource_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/resource"
)

var settleFilterQueries = db.MustParseQueries(fstest.MapFS{"s.sql": {Data: []byte(`
-- name: TestXactID
SELECT pg_current_xact_id()::xid::text;

-- name: TestWaitersOn
SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = $1 AND NOT granted;
`)}}, "s.sql")

// TestSettledChangesKeepTheListFilter is a mutation test of issue 27 (item 6): the changes a
// list settles after its snapshot (writers in flight at it) are applied to the page through
// the same authorization filter as the page's rows. Writer A creates org a and holds its
// transaction open; writer B creates org b and commits, so a list's snapshot sees b's version
// and misses a's. A token with orgs:read:b lists, and an admin lists beside it; both are seen
// waiting on A's transaction (settling its version), then A commits. The admin's list holds
// a, proving a reached the lists through the settle, and the b-token's never does. Run for
// List and for the watch's ListSnapshot, which share the settle. Seen failing with
// opts.Filter.Allows removed from settleList.
func TestSettledChangesKeepTheListFilter(t *testing.T) {
	t.Parallel()
	scope, err := auth.ParseScope("orgs:read:b")
	require.NoError(t, err)
	onlyB := (&auth.Principal{Name: "b-reader", Scopes: []auth.Scope{scope}}).ListFilter("orgs", "read")
	require.False(t, onlyB.Allows("a"))

	type lister func(ctx context.Context, s *resource.Service, f auth.Filter) (api.ObjectList, error)
	for what, list := range map[string]lister{
		"List": func(ctx context.Context, s *resource.Service, f auth.Filter) (api.ObjectList, error) {
			l, _, err := s.List(ctx, resource.KindOrg, "", resource.ListOptions{Filter: f})
			return l, err
		},
		"ListSnapshot": func(ctx context.Context, s *resource.Service, f auth.Filter) (api.ObjectList, error) {
			return s.ListSnapshot(ctx, resource.KindOrg, "", f, metadata.Selector{}, "")
		},
	} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := setup(t)

			xid := make(chan string, 1)
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			defer free()
			committedA := make(chan error, 1)
			go func() {
				committedA <- b.db.InTx(ctx, func(tx *db.Tx) error {
					if _, err := b.svc.Create(db.WithTx(ctx, tx), org("a"), api.Object{}); err != nil {
						return err
					}
					var id string
					if err := tx.QueryRow(ctx, settleFilterQueries.Get("TestXactID")).Scan(&id); err != nil {
						return err
					}
					xid <- id
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
			}()
			var idA string
			select {
			case idA = <-xid:
			case err := <-committedA:
				t.Fatalf("writer A ended early: %v", err)
			}
			ob, err := b.svc.Create(ctx, org("b"), api.Object{})
			require.NoError(t, err)
			rvB, _ := strconv.ParseInt(ob.Metadata.ResourceVersion, 10, 64)

			type answer struct {
				names []string
				rv    string
				err   error
			}
			run := func(f auth.Filter) chan answer {
				out := make(chan answer, 1)
				go func() {
					l, err := list(ctx, b.svc, f)
					out <- answer{names(l), l.ResourceVersion, err}
				}()
				return out
			}
			scoped, admin := run(onlyB), run(auth.Filter{All: true})

			// Both lists are settling A's version: each waits on A's transaction.
			require.Eventually(t, func() bool {
				var n int
				return b.db.QueryRow(ctx, settleFilterQueries.Get("TestWaitersOn"), idA).Scan(&n) == nil && n >= 2
			}, 30*time.Second, 20*time.Millisecond, "both lists wait on writer A")
			free()
			require.NoError(t, <-committedA)

			for _, c := range []struct {
				who  string
				got  chan answer
				want []string
			}{{"admin", admin, []string{"a", "b"}}, {"orgs:read:b", scoped, []string{"b"}}} {
				a := <-c.got
				require.NoError(t, a.err, c.who)
				rv, _ := strconv.ParseInt(a.rv, 10, 64)
				require.GreaterOrEqual(t, rv, rvB, "%s: the list answers a version at or past b's", c.who)
				require.Equal(t, c.want, a.names, "%s: a reaches a page through the settle only through its filter", c.who)
			}
		})
	}
}
