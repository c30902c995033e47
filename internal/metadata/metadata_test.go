package metadata

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

func TestSplitKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key, prefix, name string
		ok                bool
	}{
		{"env", "", "env", true},
		{"app.kubernetes.io/name", "app.kubernetes.io", "name", true},
		{"a-b_c.d", "", "a-b_c.d", true},
		{"A9", "", "A9", true},
		{strings.Repeat("a", 63), "", strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), "", "", false},
		{"", "", "", false},
		{"/x", "", "", false},
		{"x/", "", "", false},
		{"a/b/c", "", "", false},
		{"Upper.Case/x", "", "", false},
		{"-x", "", "", false},
		{"x-", "", "", false},
		{"a b", "", "", false},
		{strings.Repeat("a", 254) + "/x", "", "", false},
	}
	for _, c := range cases {
		p, n, err := SplitKey(c.key)
		if !c.ok {
			require.Error(t, err, c.key)
			continue
		}
		require.NoError(t, err, c.key)
		require.Equal(t, c.prefix, p, c.key)
		require.Equal(t, c.name, n, c.key)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Validate(map[string]string{"env": "", "tier": "gold-1.2_x"}, map[string]string{"note": "any text at all, even / and spaces"}))

	err := Validate(map[string]string{"ok": "fine", "bad key": "x", "v": "not ok!"}, map[string]string{"n": "a\x00b"})
	var fe *fault.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fault.KindInvalid, fe.Kind)
	var fields []string
	for _, f := range fe.Fields {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"/metadata/labels/bad key", "/metadata/labels/v", "/metadata/annotations/n"}, fields)

	big := map[string]string{"a": strings.Repeat("x", MaxAnnotationBytes)}
	require.Error(t, Validate(nil, big))
}

// fieldErrors returns Validate's field errors as pointer -> messages.
func fieldErrors(t *testing.T, err error) map[string][]string {
	t.Helper()
	var fe *fault.Error
	require.ErrorAs(t, err, &fe)
	require.Equal(t, fault.KindInvalid, fe.Kind)
	out := map[string][]string{}
	for _, f := range fe.Fields {
		out[f.Field] = append(out[f.Field], f.Message)
	}
	return out
}

func numbered(n int, prefix string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = "v"
	}
	return m
}

func TestValidateCounts(t *testing.T) {
	t.Parallel()
	require.NoError(t, Validate(numbered(MaxLabels, "l"), numbered(MaxAnnotations, "a")))

	labels := numbered(MaxLabels+1, "l")
	labels["bad key"] = "x" // the count does not stop the per-key checks
	err := Validate(labels, numbered(MaxAnnotations+3, "a"))
	got := fieldErrors(t, err)
	require.Equal(t, []string{"at most 50 labels, got 52"}, got["/metadata/labels"])
	require.Equal(t, []string{"at most 200 annotations, got 203"}, got["/metadata/annotations"])
	require.Len(t, got["/metadata/labels/bad key"], 1)
	require.Contains(t, err.Error(), "at most 50 labels, got 52")
}

func TestValidateAnnotationValueLength(t *testing.T) {
	t.Parallel()
	// Characters, not bytes: 5000 two-byte runes are 10000 bytes and still fit.
	require.NoError(t, Validate(nil, map[string]string{"a": strings.Repeat("é", MaxAnnotationValueLength)}))

	err := Validate(nil, map[string]string{
		"ok":               strings.Repeat("x", MaxAnnotationValueLength),
		"example.com/long": strings.Repeat("é", MaxAnnotationValueLength+1),
	})
	got := fieldErrors(t, err)
	require.Equal(t, map[string][]string{
		"/metadata/annotations/example.com~1long": {"annotation value must be at most 5000 characters, got 5001"},
	}, got)

	// The 256 KiB total still applies to values that are each short enough.
	many := map[string]string{}
	for i := range 60 {
		many[fmt.Sprintf("k%d", i)] = strings.Repeat("x", MaxAnnotationValueLength)
	}
	got = fieldErrors(t, Validate(nil, many))
	require.Len(t, got, 1)
	require.Contains(t, got["/metadata/annotations"][0], "more than the limit of 262144")
}

func TestIsReserved(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"strata.io", "x.strata.io", "a.b.strata.io", "Strata.IO"} {
		require.True(t, IsReserved(p), p)
	}
	for _, p := range []string{"", "strata", "io", "xstrata.io", "strata.io.example.com", "strata.iox", "example.com"} {
		require.False(t, IsReserved(p), p)
	}
}

func TestValidateReservedPrefix(t *testing.T) {
	t.Parallel()
	err := Validate(
		map[string]string{"strata.io/owner": "x", "team.strata.io/a": "-bad", "example.com/ok": "y", "strata.iox/ok": "z"},
		map[string]string{"strata.io/note": "n", "note": "fine"},
	)
	got := fieldErrors(t, err)
	require.ElementsMatch(t, []string{
		"/metadata/labels/strata.io~1owner",
		"/metadata/labels/team.strata.io~1a",
		"/metadata/annotations/strata.io~1note",
	}, keysOf(got))
	require.Equal(t, []string{`invalid label key: prefix "strata.io" is reserved: strata.io and its subdomains belong to strata`}, got["/metadata/labels/strata.io~1owner"])
	// A reserved key with a bad value reports both, each naming the key.
	require.Len(t, got["/metadata/labels/team.strata.io~1a"], 2)
	require.Contains(t, got["/metadata/labels/team.strata.io~1a"][0], "reserved")
	require.Contains(t, got["/metadata/annotations/strata.io~1note"][0], "invalid annotation key: prefix \"strata.io\" is reserved")
}

func keysOf(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func TestSplitIsSortedAndParallel(t *testing.T) {
	t.Parallel()
	p, n, v := Split(map[string]string{"b": "2", "x.io/a": "1", "a": "0"})
	require.Equal(t, []string{"", "", "x.io"}, p)
	require.Equal(t, []string{"a", "b", "a"}, n)
	require.Equal(t, []string{"0", "2", "1"}, v)
}

// FuzzSplitKey: any key either splits into parts that re-join to the key, or is refused.
func FuzzSplitKey(f *testing.F) {
	for _, s := range []string{"env", "a.b/c", "/", "a//b", "ä/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		p, n, err := SplitKey(key)
		if err != nil {
			return
		}
		joined := n
		if p != "" {
			joined = p + "/" + n
		}
		if joined != key || len(n) > 63 || len(p) > 253 {
			t.Fatalf("SplitKey(%q) = %q, %q", key, p, n)
		}
	})
}
