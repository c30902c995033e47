package sls

import (
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzYAMLScalar: resolving and constructing any plain scalar never panics, and what it
// builds is well formed: an integer is exact decimal digits, a float is a finite double
// spelled as Python's repr spells it, and only booleans come from the boolean spellings.
func FuzzYAMLScalar(f *testing.F) {
	for _, s := range []string{"yes", "010", "-010", "1_000", "1:30", "1:30.5", "~", "0x_", "0_", ".inf", "1.0e+400", "2001-12-14", "", "=", "<<", "12345678901234567890123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag := resolvePlain(s)
		v, err := constructScalar(tag, s)
		for _, explicit := range []string{tagInt, tagFloat, tagBool, tagStr} {
			_, _ = constructScalar(explicit, s) // explicit tags see any text
		}
		if err != nil {
			return
		}
		switch v := v.(type) {
		case nil, bool:
		case string:
			require.Equal(t, s, v)
		case json.Number:
			text := string(v)
			if strings.ContainsAny(text, ".e") {
				fl, err := strconv.ParseFloat(text, 64)
				require.NoError(t, err, "%q -> %q", s, text)
				require.Equal(t, text, pyRepr(fl), "%q", s)
			} else {
				_, ok := new(big.Int).SetString(text, 10)
				require.True(t, ok, "%q -> %q", s, text)
			}
		default:
			t.Fatalf("%q built %T", s, v)
		}
	})
}

// FuzzRead: any SLS body and any top.sls never make Read panic; a body under a valid top
// file never makes it fail, and every row it returns encodes as JSON.
func FuzzRead(f *testing.F) {
	tree, err := os.ReadDir("testdata/tree")
	require.NoError(f, err)
	for _, e := range tree {
		if !e.IsDir() {
			b, err := os.ReadFile(filepath.Join("testdata/tree", e.Name()))
			require.NoError(f, err)
			f.Add(b, []byte("base:\n  '*':\n    - x\n"))
		}
	}
	f.Add([]byte("a: &a [*a]\n"), []byte("base:\n  'web* or L@a,b':\n    - x\n  N@g:\n    - x\n"))
	f.Add([]byte("include: [.x, x]\nk: 1\n"), []byte("{base: {'*': [x, 'x*']}}"))
	f.Add([]byte("#!yaml\n# strata-export: {\"target\":\"group/acme/web\",\"category\":\"a.b\",\"selector\":\"role=web\"}\n{\"k\": 1}\n"), []byte("base:\n  g:\n    - match: nodegroup\n    - x\n"))
	f.Add([]byte("# strata-export: {\"target\":\"node/a\",\"category\":\"x\",\"org\":\"o\"}\nk: 1\n"), []byte("base:\n  a:\n    - x\n"))
	f.Add([]byte("# strata-export: {bad\n"), []byte("base:\n  a:\n    - x\n"))
	f.Add([]byte(aliasBomb(2)), []byte("base:\n  '*':\n    - x\n"))
	f.Fuzz(func(t *testing.T, body, top []byte) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x.sls"), body, 0o644))
		opts := Options{Nodegroups: map[string][]string{"g": {"a"}}, KnownNodes: []string{"web1", "a"}}

		require.NoError(t, os.WriteFile(filepath.Join(dir, "top.sls"), []byte("base:\n  '*':\n    - x\n"), 0o644))
		plan, err := Read(dir, opts)
		require.NoError(t, err)

		// Under a byte budget (the server reads every tree under one) the read either stops
		// with a TooLargeError naming x.sls, or answers what it answers without one, and its
		// rows stay within a small multiple of the budget. Only then is the plan encoded: a
		// tree of aliases may expand, without the budget, to a gigabyte.
		limited := opts
		limited.MaxBytes = int64(2*len(body) + 64)
		lplan, err := Read(dir, limited)
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			require.Equal(t, "x.sls", tooLarge.File)
			require.Positive(t, tooLarge.Line)
		} else {
			require.NoError(t, err)
			for _, row := range lplan.Rows {
				data, err := json.Marshal(row.Data)
				require.NoError(t, err)
				require.LessOrEqual(t, int64(len(data)), 8*limited.MaxBytes, "a row within the budget")
			}
			whole, err := json.Marshal(plan)
			require.NoError(t, err)
			got, err := json.Marshal(lplan)
			require.NoError(t, err)
			require.Equal(t, string(whole), string(got))
		}

		require.NoError(t, os.WriteFile(filepath.Join(dir, "top.sls"), top, 0o644))
		limited.MaxBytes = int64(2*(len(body)+len(top)) + 64)
		plan, err = Read(dir, limited)
		if err == nil {
			_, err = json.Marshal(plan)
			require.NoError(t, err)
		} else if !errors.As(err, &tooLarge) {
			_, err = Read(dir, opts) // I/O and a top.sls that is not a mapping fail either way
			require.Error(t, err)
		}
	})
}
