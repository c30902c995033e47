package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-jsontypes/jsontypes"
	"github.com/stretchr/testify/require"
)

// TestJSONComparisons pins what counts as a change of a JSON attribute: key order,
// whitespace and number spelling never do; a key the server added does only for exact
// attributes (sameJSON), not for ones a schema completes (covers); a changed or removed
// value always does.
func TestJSONComparisons(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		server, user string
		same, covers bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true, true},
		{`{"size":1}`, `{"size":1.0}`, true, true},
		{`{"size":100}`, `{"size":1e2}`, true, true},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`, false, false},
		{`{"engine":"pg","size":10}`, `{"engine":"pg"}`, false, true},
		{`{"o":{"a":1,"d":true}}`, `{"o":{"a":1}}`, false, true},
		{`{"l":[{"a":1,"d":2}]}`, `{"l":[{"a":1}]}`, false, true},
		{`{"l":[1,2,3]}`, `{"l":[1,2]}`, false, false},
		{`{"engine":"mysql","size":10}`, `{"engine":"pg"}`, false, false},
		{`{"size":10}`, `{"engine":"pg"}`, false, false},
		{`{"a":"1"}`, `{"a":1}`, false, false},
		{`{"a":null}`, `{"a":1}`, false, false},
		{`not json`, `not json`, true, true},
		{`not json`, `{}`, false, false},
	} {
		require.Equal(t, c.same, sameJSON(c.server, c.user), "sameJSON(%s, %s)", c.server, c.user)
		require.Equal(t, c.covers, covers(c.server, c.user), "covers(%s, %s)", c.server, c.user)
	}
}

// TestReadAndPlanKeepTheConfiguredText: a read or plan that finds the same value keeps the
// text the state (the configuration) has, so only real changes show in a plan.
func TestReadAndPlanKeepTheConfiguredText(t *testing.T) {
	t.Parallel()
	prior := jsontypes.NewNormalizedValue(`{ "engine": "pg" }`)
	require.Equal(t, prior, readJSON([]byte(`{"engine":"pg","size":10}`), prior, covers))
	require.Equal(t, `{"engine":"mysql","size":10}`, readJSON([]byte(`{"engine":"mysql","size":10}`), prior, covers).ValueString())
	require.Equal(t, `{"engine":"pg","size":10}`, readJSON([]byte(`{"engine":"pg","size":10}`), prior, sameJSON).ValueString())
	require.Equal(t, `{"a":1}`, readJSON([]byte(`{"a":1}`), jsontypes.NewNormalizedNull(), sameJSON).ValueString(), "after an import: the server's text")

	state := jsontypes.NewNormalizedValue(`{"engine":"pg","size":10}`)
	require.Equal(t, state, planJSON(jsontypes.NewNormalizedValue(`{"engine": "pg"}`), state, covers))
	planned := jsontypes.NewNormalizedValue(`{"engine": "mysql"}`)
	require.Equal(t, planned, planJSON(planned, state, covers))
	require.Equal(t, jsontypes.NewNormalizedUnknown(), planJSON(jsontypes.NewNormalizedUnknown(), state, covers))
}

// TestMasked finds the mask a reader without read-secrets is shown, at any depth.
func TestMasked(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]bool{
		`{"db":{"password":"(secret)"}}`: true,
		`{"l":[1,"(secret)"]}`:           true,
		`{"db":{"password":"hunter2"}}`:  false,
		`{"(secret)":1}`:                 false,
	} {
		v, err := decodeJSON([]byte(doc))
		require.NoError(t, err)
		require.Equal(t, want, masked(v), doc)
	}
}
