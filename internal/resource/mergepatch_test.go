package resource

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cases of RFC 7396 Appendix A.
func TestMergePatchRFC7396(t *testing.T) {
	t.Parallel()
	cases := []struct{ doc, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		got, err := MergePatch([]byte(c.doc), []byte(c.patch))
		require.NoError(t, err)
		require.JSONEq(t, c.want, string(got), "doc %s patch %s", c.doc, c.patch)
	}
}

func TestMergePatchKeepsNumbers(t *testing.T) {
	t.Parallel()
	got, err := MergePatch([]byte(`{"a":123456789012345678901234567890}`), []byte(`{"b":1.000000000000000000001}`))
	require.NoError(t, err)
	require.Equal(t, `{"a":123456789012345678901234567890,"b":1.000000000000000000001}`, string(got))
}

func TestMergePatchRefusesDeepAndTrailing(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, MaxPatchDepth+5) + "1" + strings.Repeat("}", MaxPatchDepth+5)
	_, err := MergePatch([]byte(`{}`), []byte(deep))
	require.ErrorContains(t, err, "deeper")
	_, err = MergePatch([]byte(`{}`), []byte(`{} {}`))
	require.ErrorContains(t, err, "after the JSON value")
}

// FuzzMergePatch: any input either fails cleanly or yields valid JSON, and applying the same
// object patch twice changes nothing the second time (merge patches are idempotent).
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1}}`), []byte(`{"a":{"b":null,"c":[1,2]}}`))
	f.Add([]byte(`[]`), []byte(`{"x":null}`))
	f.Add([]byte(`{"n":1e400}`), []byte(`{"n":-0}`))
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		once, err := MergePatch(doc, patch)
		if err != nil {
			return
		}
		if !json.Valid(once) {
			t.Fatalf("invalid JSON result %q", once)
		}
		twice, err := MergePatch(once, patch)
		if err != nil {
			t.Fatalf("second application failed: %v", err)
		}
		if string(once) != string(twice) {
			t.Fatalf("not idempotent: %s then %s", once, twice)
		}
	})
}
