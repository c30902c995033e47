package pillar

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pillar/sls"
)

// FuzzExportedString: any string an export writes — as a value and as a key — reads back
// through the importer's YAML 1.1 reader (Salt's rules) as the same string.
func FuzzExportedString(f *testing.F) {
	for _, s := range []string{"yes", "~", "1e3", "{{ x }}", "a\u0085b", "a\u2028b", "\x7f", "\t", "#", "", "é", "\uFEFF", "\U0001F642", "\\", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return // pillars are valid UTF-8 without NUL (DecodeObject)
		}
		var b bytes.Buffer
		b.WriteString("#!yaml\n")
		writeYAMLValue(&b, map[string]any{"v": s, s + "k": "key"}, "")
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "x.sls"), b.Bytes(), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "top.sls"), []byte("base:\n  '*':\n    - x\n"), 0o644))
		plan, err := sls.Read(dir, sls.Options{})
		require.NoError(t, err)
		require.Empty(t, plan.Unsupported, "%q: %s", s, b.String())
		require.Equal(t, map[string]any{"v": s, s + "k": "key"}, plan.Rows[0].Data, "%q", s)
	})
}

// FuzzReadSync: any stream never makes ReadSync panic; what it refuses is a 400.
func FuzzReadSync(f *testing.F) {
	f.Add([]byte(`{"type":"header","version":1}` + "\n" + `{"type":"row","target":"node/a","category":"x","data":{}}`))
	f.Add([]byte(`{"type":"header","version":1}` + "\n" + `{"type":"group","org":"a","name":"b","members":["c"]}`))
	f.Add([]byte("{}\n\n[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ReadSync(bytes.NewReader(b))
		if err != nil {
			require.Equal(t, fault.KindInvalid, fault.KindOf(err), "%v", err)
			return
		}
		_, err = json.Marshal(recs)
		require.NoError(t, err)
	})
}

// An exported SLS file grows linearly with its row however deep the row nests (values below
// maxExportIndent levels are written on one line), and what it writes there still reads back
// through the importer as the same value.
func TestExportFileLinearInDepth(t *testing.T) {
	t.Parallel()
	nested := func(levels int) string {
		return strings.Repeat(`{"a":`, levels-1) + `{"leaf":[1,{"x":"y"}],"b":{}}` + strings.Repeat("}", levels-1)
	}
	deep := nested(5000)
	file, err := exportFile(sls.Placement{Target: "global", Category: "deep"}, Target{Kind: "global"}, []byte(deep))
	require.NoError(t, err)
	require.LessOrEqual(t, len(file), 2*len(deep)+1024, "%d bytes for a %d-byte row", len(file), len(deep))

	// 100 levels (the import's own depth limit is 128): indented, then compact, read back.
	raw := nested(100)
	var b bytes.Buffer
	b.WriteString("#!yaml\n")
	v, err := decodeExact([]byte(raw))
	require.NoError(t, err)
	writeYAMLValue(&b, v, "")
	require.Contains(t, b.String(), `{"a": {"a": `, "compact below the indented levels")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.sls"), b.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "top.sls"), []byte("base:\n  '*':\n    - x\n"), 0o644))
	plan, err := sls.Read(dir, sls.Options{})
	require.NoError(t, err)
	require.Empty(t, plan.Unsupported)
	got, err := json.Marshal(plan.Rows[0].Data)
	require.NoError(t, err)
	require.JSONEq(t, raw, string(got))
}
