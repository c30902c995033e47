// Package jsondepth bounds how deeply the JSON values strata stores may nest. Pillar data,
// object specs and kind schemas (defaults included) share one limit, Max, the depth a kind
// schema document may have: each write path calls Check on the value it is about to store, so
// nothing new nests deeper than the code reading it back (the merge, the console, the
// Salt-tree export, Salt itself) is meant for, and a refusal names where the value goes too
// deep. Real pillars and specs are a handful of levels deep; a value nested thousands of levels
// is an attack on whatever walks it.
package jsondepth

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// Max is the deepest an object or array may nest, the value itself being level 1: {"a":{}}
// is two levels deep, and scalars add no level.
const Max = 128

// Check returns a 422 naming, by JSON pointer (base followed by the path inside v), an object
// or array of v nested deeper than Max levels; nil when v is within the limit. It never looks
// below level Max+1, so its work is bounded by the part of v within the limit.
func Check(v any, base string) error {
	path := make([]string, 0, 16)
	if at, ok := tooDeep(v, 1, &path); ok {
		return fault.UnprocessableFields(fmt.Sprintf("the value nests deeper than %d levels", Max), []fault.FieldError{{
			Field:   base + at,
			Message: fmt.Sprintf("is level %d: objects and arrays nest at most %d levels", Max+1, Max),
		}})
	}
	return nil
}

// tooDeep walks v at level, path holding the reference tokens down to it; it answers the
// pointer of the first container found beyond Max. The pointer is built once, at the end,
// so a deep value costs no string per level.
func tooDeep(v any, level int, path *[]string) (string, bool) {
	switch t := v.(type) {
	case map[string]any:
		if level > Max {
			return Pointer("", *path), true
		}
		for k, c := range t {
			*path = append(*path, k)
			if at, ok := tooDeep(c, level+1, path); ok {
				return at, true
			}
			*path = (*path)[:len(*path)-1]
		}
	case []any:
		if level > Max {
			return Pointer("", *path), true
		}
		for i, c := range t {
			*path = append(*path, strconv.Itoa(i))
			if at, ok := tooDeep(c, level+1, path); ok {
				return at, true
			}
			*path = (*path)[:len(*path)-1]
		}
	}
	return "", false
}

// Pointer is the RFC 6901 pointer base followed by the reference tokens (unescaped), built
// in one string. Walkers of a stored value keep a stack of tokens and call it only where they
// answer: building a pointer string at every member instead copies a long key once for each
// value below it, (key length × members) bytes for one request.
func Pointer(base string, tokens []string) string {
	var b strings.Builder
	n := len(base)
	for _, t := range tokens {
		n += 1 + len(t)
	}
	b.Grow(n)
	b.WriteString(base)
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}

// Raw reports the deepest nesting of a JSON document without decoding it (brackets outside
// strings), so a caller can refuse a document before spending a decode on it.
func Raw(doc []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range doc {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
}
