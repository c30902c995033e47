package metadata

import (
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
