package jsondepth_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/jsondepth"
)

// nested is levels objects, each the value of key k of the one above, around a scalar.
func nested(levels int, k string) string {
	return strings.Repeat(`{"`+k+`":`, levels-1) + `{"leaf":1}` + strings.Repeat("}", levels-1)
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

func TestCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, jsondepth.Check(decode(t, nested(jsondepth.Max, "a")), "/spec"))
	require.Equal(t, jsondepth.Max, jsondepth.Raw([]byte(nested(jsondepth.Max, "a"))))

	err := jsondepth.Check(decode(t, nested(jsondepth.Max+1, "a/b")), "/spec")
	var fe *fault.Error
	require.True(t, errors.As(err, &fe))
	require.Equal(t, fault.KindUnprocessable, fe.Kind)
	require.Len(t, fe.Fields, 1)
	require.Equal(t, "/spec"+strings.Repeat("/a~1b", jsondepth.Max), fe.Fields[0].Field)
	require.Contains(t, fe.Fields[0].Message, "128")

	// Arrays count as objects do; scalars add no level; the pointer names indexes.
	arr := strings.Repeat("[0,", jsondepth.Max) + "[]" + strings.Repeat("]", jsondepth.Max)
	err = jsondepth.Check(decode(t, arr), "")
	require.True(t, errors.As(err, &fe))
	require.Equal(t, strings.Repeat("/1", jsondepth.Max), fe.Fields[0].Field)
	require.NoError(t, jsondepth.Check("just a string", ""))
	require.Equal(t, 1, jsondepth.Raw([]byte(`{"a":"[[[[{{"}`)), "brackets in strings do not count")
}
