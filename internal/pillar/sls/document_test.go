package sls

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadDocumentPositions: a single document's problems carry the line and column PyYAML
// names (checked with PyYAML 6: python3 -c 'import yaml; yaml.safe_load(...)'), and the
// data is typed as in a tree.
func TestReadDocumentPositions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src       string
		line, col int
		reason    string
	}{
		{"a: b: c\n", 1, 5, "mapping values are not allowed"},            // PyYAML: line 1, column 5
		{"a: 1\n b: 2\n", 2, 3, "mapping values are not allowed"},        // line 2, column 3
		{"a: 1\nb: 2\nc 2\nd: 3\n", 3, 1, "could not find expected ':'"}, // while scanning a simple key, line 3, column 1
		{"key: value\n\tother: 1\n", 2, 1, "tab"},                        // line 2, column 1
		{"a:\n  x: 1\n  yes: 2\n", 3, 3, "boolean True"},
		{"a: !!binary aGk=\n", 1, 4, "!!binary"},
		{"a: 1\n# {{ x }}\n", 2, 3, "Jinja"},
		{"a: 1\n---\nb: 2\n", 2, 1, "second YAML document"}, // PyYAML: found another document, line 2, column 1
	} {
		data, problems, err := ReadDocument("f.sls", []byte(c.src), Options{})
		require.NoError(t, err, c.src)
		require.Nil(t, data, c.src)
		require.Len(t, problems, 1, c.src)
		require.Equal(t, c.line, problems[0].Line, c.src)
		require.Equal(t, c.col, problems[0].Column, c.src)
		require.Contains(t, problems[0].Reason, c.reason, c.src)
		require.Equal(t, "f.sls", problems[0].File)
	}
	data, problems, err := ReadDocument("f.sls", []byte("#!yaml\na: {{ not jinja }}\n"), Options{})
	require.NoError(t, err)
	require.Len(t, problems, 1, "#!yaml: no Jinja, but {{ is a YAML flow mapping used as a key")
	data, problems, err = ReadDocument("f.sls", []byte("#!yaml\na: '{{ x }}'\nb: on\n"), Options{})
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, map[string]any{"a": "{{ x }}", "b": true}, data)
	data, problems, err = ReadDocument("f.sls", []byte("   \n"), Options{})
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, map[string]any{}, data)
}
