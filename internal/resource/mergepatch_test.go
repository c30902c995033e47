package resource

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratahq/strata/api"
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

// TestMetadataPatchIsAMergePatch holds the direct application of a labels-and-annotations
// patch (metadataPatch) to the general path it skips (mergePatchObject): same object for
// every patch it takes, cur left as it was, and every other patch left to the general path.
func TestMetadataPatchIsAMergePatch(t *testing.T) {
	t.Parallel()
	curs := []api.Object{
		{Kind: "Node", Metadata: api.ObjectMeta{Name: "n1", Org: "o", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"a": "1", "b": "2"}, Annotations: map[string]string{"x": "y"}},
			Spec: json.RawMessage(`{"org": "o", "n": 12345678901234567890, "z": [1, {"k": null}]}`), Status: json.RawMessage(`{"s":1}`)},
		{Kind: "Org", Metadata: api.ObjectMeta{Name: "o"}},
		{Kind: "Widget", Metadata: api.ObjectMeta{Name: "w", Org: "o", Labels: map[string]string{}, Annotations: map[string]string{}}, Spec: json.RawMessage(`null`)},
	}
	direct := []string{
		`{"metadata":{"labels":{"a":"9"}}}`,
		`{"metadata":{"labels":{"a":null,"c":"3"}}}`,
		`{"metadata":{"labels":null}}`,
		`{"metadata":{"labels":{}}}`,
		`{"metadata":{"labels":{"a":"1","a":"2"}}}`,
		`{"metadata":{"annotations":{"x":null,"note":"ü \u00e9"},"labels":{"k":""}}}`,
		`{"metadata":{"annotations":null}}`,
		`{"metadata":{"resourceVersion":"7","labels":{"b":null}}}`,
		`{"metadata":{"resourceVersion":null}}`,
		`{"metadata":{}}`,
		` { "metadata" : { "labels" : { "d" : "4" } } } `,
	}
	general := []string{
		`{"metadata":{"labels":{"a":1}}}`,
		`{"metadata":{"labels":{"a":{"b":"c"}}}}`,
		`{"metadata":{"labels":["a"]}}`,
		`{"metadata":{"resourceVersion":7}}`,
		`{"metadata":{"name":"n1","labels":{"a":"2"}}}`,
		`{"metadata":null}`,
		`{"metadata":{"labels":{"a":"2"}},"spec":{"org":"p"}}`,
		`{"kind":"Node","metadata":{"labels":{"a":"2"}}}`,
		`{"spec":{"n":1}}`,
	}
	// As normalize, which every patched object goes through next, treats the spec.
	canonical := func(o api.Object) api.Object {
		if len(o.Spec) == 0 || string(o.Spec) == "null" {
			o.Spec = json.RawMessage("{}")
		}
		s, err := canonicalSpec(o.Spec)
		require.NoError(t, err)
		o.Spec = s
		return o
	}
	for _, cur := range curs {
		for _, patch := range direct {
			members, err := checkPatchMembers([]byte(patch))
			require.NoError(t, err, patch)
			mp, ok := parseMetadataPatch(members)
			require.True(t, ok, patch)
			before, err := json.Marshal(cur)
			require.NoError(t, err)
			want, err := mergePatchObject(cur, []byte(patch))
			require.NoError(t, err, patch)
			got := mp.apply(cur)
			require.Equal(t, canonical(want), canonical(got), "%s on %s", patch, before)
			after, err := json.Marshal(cur)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "the patch changed cur's maps")
		}
	}
	for _, patch := range general {
		members, err := checkPatchMembers([]byte(patch))
		require.NoError(t, err, patch)
		_, ok := parseMetadataPatch(members)
		require.False(t, ok, patch)
	}
}
