package secret

// Masked is what a reader without the right to a secret sees in its place.
const Masked = "(secret)"

// Mask returns v's structure with every scalar leaf replaced by Masked: maps keep their
// keys and lists their length, so a masked value still shows what is set and where, never
// what it is. Empty maps and lists stay empty.
func Mask(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Mask(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Mask(e)
		}
		return out
	}
	return Masked
}
