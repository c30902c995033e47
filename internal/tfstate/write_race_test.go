package tfstate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

// withStateReadDelay replaces, for one test, the write path's read of the current state with
// the same query plus a 100 ms pause after the row is found, so that every concurrent writer
// reaches that read before any of them commits: the race the row lock must settle is then
// certain, not a matter of scheduling. keepRowLock false also drops FOR UPDATE (the control).
// Tests using it must not be parallel: they swap an entry of the package's query set, and
// Go runs parallel tests only after every non-parallel one has finished.
func withStateReadDelay(t *testing.T, keepRowLock bool) {
	orig := q["StateGetForUpdate"]
	text, tail, ok := strings.Cut(orig.Text, "FOR UPDATE OF s")
	require.True(t, ok, "the write path reads the state row FOR UPDATE")
	text += "AND (SELECT true FROM pg_sleep(0.1))\n"
	if keepRowLock {
		text += "FOR UPDATE OF s"
	}
	q["StateGetForUpdate"] = &db.Query{Name: orig.Name, Text: text + tail}
	t.Cleanup(func() { q["StateGetForUpdate"] = orig })
}

// concurrentSameSerialWrites has n writers post serial 2 over serial 1 at once, each with
// other bytes (no lock: the way two `terraform apply -lock=false` collide), and returns how
// many were acknowledged and the serial-2 body that is stored.
func concurrentSameSerialWrites(t *testing.T, n int) (acked []string, stored string) {
	ctx := context.Background()
	b := setup(t, setupOpts{noKeeper: true, maxConns: int32(n + 2)})
	b.project(t, "p")
	_, err := b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: stateJSON(1, "l", 1)})
	require.NoError(t, err)

	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		body := strings.Replace(string(stateJSON(2, "l", 1)), `"outputs": {}`, fmt.Sprintf(`"outputs": {"writer": {"value": "%d", "type": "string"}}`, i), 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := b.svc.StateWrite(ctx, b.actor, "p", "w", WriteRequest{Body: []byte(body)}); err == nil {
				mu.Lock()
				acked = append(acked, body)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	st, err := b.svc.StateGet(ctx, "p", "w")
	require.NoError(t, err)
	return acked, string(st.Data)
}

// TestConcurrentWritersRowLock: of writers racing to put other bytes under the same next
// serial, exactly one is acknowledged and its bytes are what is stored; every other one gets
// a 409 instead of overwriting an acknowledged write. The row lock in the write path is what
// guarantees this; the control below shows the assertion catches its absence.
func TestConcurrentWritersRowLock(t *testing.T) {
	withStateReadDelay(t, true)
	acked, stored := concurrentSameSerialWrites(t, 8)
	require.Len(t, acked, 1, "exactly one of the racing writes is acknowledged")
	require.Equal(t, acked[0], stored, "the acknowledged write is the stored one")
}

// TestConcurrentWritersRowLockControl drops FOR UPDATE from the same read: every writer sees
// serial 1, all are acknowledged, and all but the last are silently lost — what the
// assertions of TestConcurrentWritersRowLock exist to catch.
func TestConcurrentWritersRowLockControl(t *testing.T) {
	withStateReadDelay(t, false)
	acked, _ := concurrentSameSerialWrites(t, 8)
	require.Greater(t, len(acked), 1, "without the row lock, racing writes are all acknowledged")
}
