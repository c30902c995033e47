package resource_test

import (
	"strconv"
	"testing"

	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// FuzzParseResourceVersion: whatever a client sends as ?resourceVersion=, the parser never
// panics, accepts only positive integers (returning their value), and refuses everything
// else as a 400 naming the parameter, quoting at most a bounded part of the input.
func FuzzParseResourceVersion(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "", "abc", "9223372036854775807", "9223372036854775808", "+5", "007", " 1", "1e3", "0x10", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := resource.ParseResourceVersion("resourceVersion", raw)
		if err == nil {
			want, perr := strconv.ParseInt(raw, 10, 64)
			if perr != nil || want != n || n < 1 {
				t.Fatalf("%q accepted as %d", raw, n)
			}
			return
		}
		if fault.KindOf(err) != fault.KindInvalid {
			t.Fatalf("%q: %v is not a 400", raw, err)
		}
		if len(err.Error()) > 1000 { // the input is quoted truncated to 40 bytes
			t.Fatalf("%q: message of %d bytes", raw, len(err.Error()))
		}
	})
}
