package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/resource"
)

// serveListsFromIndex runs a change poller over svc's database with the list index on (as
// every replica does) until the test ends, and waits until the index is loaded, so the
// test's lists are answered from memory: the list, watch, selector and isolation tests
// then hold for the index. The poller only polls (no LISTEN session): a list that finds
// the index behind the database wakes it.
func serveListsFromIndex(t testing.TB, svc *resource.Service) *resource.Index {
	t.Helper()
	hub := resource.NewHub(svc, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ix := hub.ServeLists()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitIndex(t, ix)
	return ix
}

// waitIndex waits until ix is loaded.
func waitIndex(t testing.TB, ix *resource.Index) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ix.Stats().Ready; time.Sleep(5 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the list index did not load")
	}
}
