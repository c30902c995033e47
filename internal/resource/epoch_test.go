package resource_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

var epochQueries = db.MustParseQueries(fstest.MapFS{"e.sql": {Data: []byte(`
-- name: TestForgetEpoch
-- As after a failover or a recovery: the cluster's epoch is no longer the recorded one.
UPDATE {{schema}}.history_epochs SET epoch = 'lost/' || epoch WHERE epoch NOT LIKE 'lost/%';

-- name: TestEpochCheck
SELECT {{schema}}.history_epoch_check($1);

-- name: TestEpochOf
SELECT fork_version, first_version FROM {{schema}}.history_epochs WHERE epoch = $1;

-- name: TestLastEpoch
SELECT fork_version, first_version FROM {{schema}}.history_epochs ORDER BY first_version DESC, at DESC LIMIT 1;

-- name: TestPoints
-- The version sequence's last draw, the compaction point and the resolved point.
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {{schema}}.resource_version_seq),
	(SELECT coalesce(max(compacted_through), 0) FROM {{schema}}.watch_compaction),
	(SELECT coalesce(max(resolved_through), 0) FROM {{schema}}.watch_resolved);
`)}}, "e.sql")

// TestEpochMovesTheCompactionPoint (issue 30, item 7h): a new history epoch — seen by
// history_epoch_check on a connection (a failover or a recovery, simulated by the recorded
// epoch no longer being the cluster's) and started by RestoreEpoch after a restore — moves
// the version sequence a billion past every version drawn and the compaction point (and the
// resolved point) to exactly that first version. So a watch from any version of the history
// before — the newest kept change included, and any version a lost history may have drawn
// past it — is a 410, a watch from the first version is not, and the next change lies past
// it. Before, only the failover and restore tests (cmd/strata) checked the compaction point;
// seen failing here by hand with each function leaving the compaction point where it was,
// and with it moved only to the newest kept change.
func TestEpochMovesTheCompactionPoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, how := range []string{"new epoch", "restore"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var kept int64
			for i := range 3 {
				o, err := b.svc.Create(ctx, org(fmt.Sprintf("o%d", i)), api.Object{})
				require.NoError(t, err)
				kept, err = strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
				require.NoError(t, err)
			}
			var drawn, compacted, resolved int64
			require.NoError(t, b.db.QueryRow(ctx, epochQueries.Get("TestPoints")).Scan(&drawn, &compacted, &resolved))
			require.GreaterOrEqual(t, drawn, kept)
			require.Less(t, compacted, kept, "the setup holds: nothing is compacted yet")

			var fork, first int64
			switch how {
			case "new epoch":
				_, err := b.db.Exec(ctx, epochQueries.Get("TestForgetEpoch"))
				require.NoError(t, err)
				var ep string
				require.NoError(t, b.db.QueryRow(ctx, epochQueries.Get("TestEpochCheck"), b.db.Schema()).Scan(&ep))
				require.NoError(t, b.db.QueryRow(ctx, epochQueries.Get("TestEpochOf"), ep).Scan(&fork, &first))
			case "restore":
				var err error
				restored, err := b.db.RestoreEpoch(ctx)
				require.NoError(t, err)
				require.NoError(t, b.db.QueryRow(ctx, epochQueries.Get("TestLastEpoch")).Scan(&fork, &first))
				require.Equal(t, restored, first, "RestoreEpoch returns the new history's first version")
			}
			require.Equal(t, kept, fork, "the fork is the newest kept change")
			require.Equal(t, max(drawn, kept)+1_000_000_000, first, "the new history starts a billion past every version drawn")
			var drawnAfter int64
			require.NoError(t, b.db.QueryRow(ctx, epochQueries.Get("TestPoints")).Scan(&drawnAfter, &compacted, &resolved))
			require.Equal(t, first, drawnAfter, "the sequence moved to the first version")
			require.Equal(t, first, compacted, "the compaction point is the first version of the new history")
			require.GreaterOrEqual(t, resolved, first, "no version below the first is awaited")

			h := startHub(t, b, nil)
			for _, from := range []int64{0, kept - 1, kept, drawn + 1, first - 1} {
				_, err := h.Subscribe(ctx, resource.KindOrg, "", from)
				require.Equal(t, fault.KindGone, fault.KindOf(err), "a watch from %d, before the new history, lists again: %v", from, err)
			}
			sub, err := h.Subscribe(ctx, resource.KindOrg, "", first)
			require.NoError(t, err, "a watch from the new history's first version")
			defer sub.Close()
			o, err := b.svc.Create(ctx, org("after"), api.Object{})
			require.NoError(t, err)
			rv, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			require.NoError(t, err)
			require.Greater(t, rv, first, "the next change lies past the first version")
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c, err := sub.Next(wctx)
			require.NoError(t, err, "the change after the jump arrives within 10 s")
			require.Equal(t, rv, c.RV)
			require.Equal(t, "after", c.Name)
		})
	}
}
