package compat_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/kind/compat"
)

func TestHasValueAndLacks(t *testing.T) {
	t.Parallel()
	spec := func(doc string) any { return schema(t, doc) }
	s := spec(`{
		"size": "1Gi",
		"nothing": null,
		"ports": [{"name": "http", "port": 80}, {"name": "grpc"}],
		"labels": {"a": {"team": "x"}, "b": {}},
		"matrix": [[{"v": 1}], [{}]],
		"empty": [],
		"db": {"host": "h"}
	}`)
	cases := []struct {
		path       string
		has, lacks bool
	}{
		{"/properties/size", true, false},
		{"/properties/nothing", true, false}, // an explicit null is stored data
		{"/properties/missing", false, true},
		{"/properties/ports/items/properties/port", true, true}, // grpc lacks it
		{"/properties/ports/items/properties/name", true, false},
		{"/properties/labels/additionalProperties/properties/team", true, true}, // b lacks it
		{"/properties/matrix/items/items/properties/v", true, true},
		{"/properties/empty/items/properties/x", false, false}, // no item: nothing lacks it
		{"/properties/db/properties/port", false, true},
		{"/properties/opt/properties/x", false, false},  // a missing parent is not a lack
		{"/properties/size/properties/x", false, false}, // a non-object parent is not a lack
		{"/properties/ports/items", true, false},
		{"/properties/ports/anyOf/0", false, false},
		{"", true, false},
		{"nonsense", false, false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.has, compat.HasValue(s, tc.path), "HasValue %s", tc.path)
		require.Equal(t, tc.lacks, compat.Lacks(s, tc.path), "Lacks %s", tc.path)
	}
	require.True(t, compat.HasValue(spec(`{"a/b":{"c~d":1}}`), "/properties/a~1b/properties/c~0d"))
	require.False(t, compat.HasValue(nil, "/properties/a"))
	require.False(t, compat.Lacks(nil, "/properties/a"))
}
