package pillar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// TestRenameUnderConcurrentRenders (issue 19, acceptance): replica A renames a node back and
// forth (web01 ⇄ web02) while replica B renders both names through its cache without pause and
// watches nodes. No render ever shows a mix of identities — every render that succeeds has the
// node's own pillar and its group's (they hang off the row, and a render is one statement);
// once the renames stop, B renders the final name and not the other; and B's watch, across all
// renames, delivers each DELETED + ADDED pair exactly once, in order.
func TestRenameUnderConcurrentRenders(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := pgtest.NewDatabaseURL(t)
	a, b := newReplica(t, url), newReplica(t, url)
	for _, r := range []*replica{a, b} {
		r.res.OnRename(r.svc.Renamed)
	}
	_, err := a.res.Create(ctx, resource.Ref{Kind: resource.KindOrg, Name: "acme"}, api.Object{})
	require.NoError(t, err)
	_, err = a.res.Create(ctx, resource.Ref{Kind: resource.KindNode, Name: "web01"}, node("acme", map[string]string{"role": "web"}))
	require.NoError(t, err)
	_, err = a.res.Create(ctx, resource.Ref{Kind: resource.KindGroup, Org: "acme", Name: "web"}, api.Object{})
	require.NoError(t, err)
	_, err = a.res.AddMember(ctx, "acme", "web", "web01")
	require.NoError(t, err)
	_, _, err = a.svc.Put(ctx, pillar.Target{Kind: "node", Node: "web01"}, "me", obj(t, `{"me":"node"}`), "", "t")
	require.NoError(t, err)
	_, _, err = a.svc.Put(ctx, pillar.Target{Kind: "group", Org: "acme", Group: "web"}, "g", obj(t, `{"grp":"web"}`), "", "t")
	require.NoError(t, err)

	hub := resource.NewHub(b.res, func(ctx context.Context) (*db.Session, error) {
		return b.db.OpenSession(ctx, "rename test")
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	hctx, stopHub := context.WithCancel(ctx)
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hctx) }()
	defer func() { stopHub(); <-hubDone }()
	list, _, err := b.res.List(ctx, resource.KindNode, "", resource.ListOptions{Filter: auth.Filter{All: true}})
	require.NoError(t, err)
	from, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	sub, err := hub.Subscribe(ctx, resource.KindNode, "", from)
	require.NoError(t, err)
	defer sub.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var mixed []string
	renders := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"web01", "web02"}[w%2]
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := b.svc.Render(ctx, b.res, name, false)
				if err != nil {
					continue // the name is not a node right now
				}
				mu.Lock()
				renders++
				if out.Decoded()["me"] != "node" || out.Decoded()["grp"] != "web" {
					b, _ := json.Marshal(out.Decoded())
					mixed = append(mixed, name+": "+string(b))
				}
				mu.Unlock()
			}
		}()
	}
	const renames = 20
	names := []string{"web01", "web02"}
	for i := range renames {
		_, err := a.res.Rename(ctx, resource.Ref{Kind: resource.KindNode, Name: names[i%2]}, names[(i+1)%2])
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	require.Empty(t, mixed, "renders that mixed identities")
	require.Positive(t, renders)

	// After the last rename the node is web01 (an even number of renames): B renders it, and
	// the other name is unknown once B's cache has heard of the renames.
	require.Eventually(t, func() bool {
		_, err1 := b.svc.Render(ctx, b.res, "web01", false)
		_, err2 := b.svc.Render(ctx, b.res, "web02", false)
		return err1 == nil && err2 != nil
	}, 10*time.Second, 20*time.Millisecond)

	var got []string
	for len(got) < 2*renames {
		nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := sub.Next(nctx)
		ncancel()
		require.NoError(t, err, "after %d events", len(got))
		got = append(got, c.Type+" "+c.Name)
	}
	for i := range renames {
		require.Equal(t, []string{"DELETED " + names[i%2], "ADDED " + names[(i+1)%2]}, got[2*i:2*i+2], fmt.Sprintf("rename %d", i))
	}
	nctx, ncancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = sub.Next(nctx)
	ncancel()
	require.Error(t, err, "no event twice")
}
