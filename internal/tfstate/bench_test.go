package tfstate

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

func benchService(b *testing.B, keeper bool) *Service {
	b.Helper()
	url := pgtest.NewDatabaseURL(b)
	d, err := db.Open(context.Background(), db.Options{URL: url, MaxConns: 16, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	opts := Options{Logger: slog.New(slog.DiscardHandler)}
	if keeper {
		opts.SessionURL = url
	}
	svc, err := New(d, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Close() })
	if _, _, err := svc.ProjectPut(context.Background(), Actor{Name: "bench"}, "p"); err != nil {
		b.Fatal(err)
	}
	return svc
}

// BenchmarkLockUnlock measures one LOCK plus one UNLOCK of an existing workspace (the
// round trips behind every terraform plan/apply over HTTP), with and without the keeper
// that also holds the advisory key, sequentially and over 16 workspaces in parallel.
func BenchmarkLockUnlock(b *testing.B) {
	for _, keeper := range []bool{true, false} {
		b.Run(fmt.Sprintf("keeper=%v", keeper), func(b *testing.B) {
			svc := benchService(b, keeper)
			ctx := context.Background()
			actor := Actor{Name: "bench"}
			for i := range 16 {
				if _, err := svc.StateWrite(ctx, actor, "p", fmt.Sprintf("w%d", i), WriteRequest{Body: stateJSON(1, "l", 1)}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ws := fmt.Sprintf("w%d", next.Add(1)%16)
				body := lockBody("L-" + ws)
				for pb.Next() {
					if _, err := svc.Lock(ctx, actor, "p", ws, body); err != nil {
						b.Error(err)
						return
					}
					if err := svc.Unlock(ctx, actor, "p", ws, UnlockRequest{ID: "L-" + ws}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
