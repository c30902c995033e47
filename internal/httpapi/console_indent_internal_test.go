package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Down to maxIndentLevels the console's indentation is json.Indent's, byte for byte; below it
// values are compact, so the output stays linear in the input however deep it nests.
func TestIndentJSON(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{}`, `[]`, `1`, `"x"`, `null`,
		`{"a": 1, "b": [1, 2, {"c": "d\"}{,:"}], "e": {}, "f": [], "g": { }, "h": [ ]}`,
		`[{"a":[[[]]]},{"b\\":"\\\\"}]`,
		strings.Repeat(`{"a":`, maxIndentLevels-1) + `[1,{}]` + strings.Repeat("}", maxIndentLevels-1),
	} {
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(doc), "", "  "))
		require.Equal(t, want.String(), indentJSON([]byte(doc)), doc)
	}

	deep := strings.Repeat(`{"a":`, 5000) + `{"leaf":[1,2]}` + strings.Repeat("}", 5000)
	got := indentJSON([]byte(deep))
	require.LessOrEqual(t, len(got), 2*len(deep))
	var a, b any
	require.NoError(t, json.Unmarshal([]byte(deep), &a))
	require.NoError(t, json.Unmarshal([]byte(got), &b))
	require.Equal(t, a, b, "the same value")
	require.Contains(t, got, `{"a":{"a":`, "compact below the indented levels")
}
