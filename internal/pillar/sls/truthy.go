package sls

import (
	"encoding/json"
	"math/big"
)

// truthy is Python's truth value of a loaded value: None, False, zero, "" and empty
// containers are false. Salt's yaml renderer turns a false document into {}, and the
// include loop skips a false included state.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		return !ok || r.Sign() != 0
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}
