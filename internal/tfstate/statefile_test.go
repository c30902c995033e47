package tfstate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseState(t *testing.T) {
	t.Parallel()
	m := parseState([]byte(`{"version":4,"serial":7,"lineage":"abc","resources":[{"mode":"managed"}]}`))
	require.Equal(t, stateMeta{Readable: true, Serial: 7, Lineage: "abc", HasResources: true}, m)
	m = parseState([]byte(`{"version":4,"serial":0,"lineage":"abc","resources":[]}`))
	require.Equal(t, stateMeta{Readable: true, Serial: 0, Lineage: "abc"}, m)
	// OpenTofu's encrypted payload: no serial, no lineage.
	require.False(t, parseState([]byte(`{"meta":{"key_provider.pbkdf2.k":"eyJ"},"encrypted_data":"AAAA","encryption_version":"v0"}`)).Readable)
	require.False(t, parseState([]byte(`not json`)).Readable)
	require.False(t, parseState([]byte(`{"serial":1.5,"lineage":"x"}`)).Readable)
	require.False(t, parseState([]byte(`{"serial":"1","lineage":"x"}`)).Readable)
}

func TestPlaceholderStateIsEmptyValidState(t *testing.T) {
	t.Parallel()
	p := placeholderState()
	m := parseState(p)
	require.True(t, m.Readable)
	require.Equal(t, int64(0), m.Serial)
	require.False(t, m.HasResources)
	require.Len(t, m.Lineage, 36)
	var v map[string]any
	require.NoError(t, json.Unmarshal(p, &v))
	require.EqualValues(t, 4, v["version"])
	require.NotEqual(t, string(p), string(placeholderState()), "each placeholder has its own lineage")
}

func TestWithSerial(t *testing.T) {
	t.Parallel()
	in := "{\n  \"version\": 4,\n  \"serial\": 12,\n  \"lineage\": \"l\",\n  \"outputs\": {\"serial\": 3}\n}\n"
	out, ok := withSerial([]byte(in), 13)
	require.True(t, ok)
	require.Equal(t, "{\n  \"version\": 4,\n  \"serial\": 13,\n  \"lineage\": \"l\",\n  \"outputs\": {\"serial\": 3}\n}\n", string(out))
	_, ok = withSerial([]byte(`{"outputs":{"serial":3}}`), 1)
	require.False(t, ok)
	_, ok = withSerial([]byte(`[1]`), 1)
	require.False(t, ok)
}
