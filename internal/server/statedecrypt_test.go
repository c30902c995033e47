package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseCopy: pg_restore's COPY text of a table is read back exactly — columns by name,
// \N as NULL, and every escape COPY writes (a state may hold tabs, newlines and backslashes).
func TestParseCopy(t *testing.T) {
	t.Parallel()
	out := "--\n-- PostgreSQL database dump\n--\n\nSET x = 1;\n\n" +
		"COPY net.states (id, name, \"data\") FROM stdin;\n" +
		"1\tdefault\t{\"a\":\"tab\\there\\nline\\\\back\"}\n" +
		"2\tdev\t\\N\n" +
		"3\toct\t\\101\\x42\\v\\b\\f\\r\n" +
		"\\.\n\n"
	tab, err := parseCopy([]byte(out), "states")
	require.NoError(t, err)
	require.Len(t, tab.rows, 3)
	name, ok := tab.get(tab.rows[0], "name")
	require.True(t, ok)
	require.Equal(t, "default", *name)
	data, _ := tab.get(tab.rows[0], "data")
	require.Equal(t, "{\"a\":\"tab\there\nline\\back\"}", *data)
	data, _ = tab.get(tab.rows[1], "data")
	require.Nil(t, data)
	data, _ = tab.get(tab.rows[2], "data")
	require.Equal(t, "AB\v\b\f\r", *data)

	empty, err := parseCopy([]byte("SET x = 1;\n"), "states")
	require.NoError(t, err)
	require.Empty(t, empty.rows)
	_, err = parseCopy([]byte("COPY net.states (id) FROM stdin;\n1\n"), "states")
	require.Error(t, err, "a block without its end is refused")
}
