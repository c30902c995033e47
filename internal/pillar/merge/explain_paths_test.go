package merge

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExplainLinearInTheRow (review of issue 27, "What to build" 4: bounded work per request;
// the console and every answer written from a row linear in its size): Explain gives every
// leaf its full JSON pointer as a string of its own, so a row holding one long key with many
// leaves under it costs (key length × leaves) bytes: with a 4 MB key and 700,000 short leaves
// (an 8 MiB body, two levels deep, well within the depth limit) that is terabytes, and
// GET /v1/nodes/{node}/pillar?explain=true or the console's node page (which asks for the
// explanation) takes the replica down for a token with pillars:write on one node. Here a 16 KB
// key and 2,000 leaves (a 30 KB row) must not cost more than a small multiple of the row.
func TestExplainLinearInTheRow(t *testing.T) {
	long := strings.Repeat("k", 16<<10)
	leaves := map[string]any{}
	for i := 0; i < 2000; i++ {
		leaves[fmt.Sprintf("l%d", i)] = json.Number("1")
	}
	data := map[string]any{long: leaves}
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	layers := []Layer{{Target: "node/web01", Category: "big", Data: data}}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, expl := Explain(layers, Options{})
	runtime.ReadMemStats(&after)
	require.Len(t, expl, 2000)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64*len(raw)), "Explain allocated %d bytes for a %d-byte row", allocated, len(raw))
}
