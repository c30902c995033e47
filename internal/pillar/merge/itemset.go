package merge

import (
	"encoding/binary"
	"encoding/json"
	"hash/maphash"
	"math"
	"math/big"
	"strconv"
)

// itemSet holds the items of a lower list for Salt's list merge, so that each item of the
// higher list is looked up in constant expected time instead of compared with every lower item:
// two lists of n items cost O(n) comparisons, not O(n²). Its hash agrees with equal: items
// equal under equal (Python's ==, numbers by value) hash alike, and a lookup confirms a hash
// match with equal itself, so the set answers exactly what the pairwise scan answered.
type itemSet struct {
	seed    maphash.Seed
	buckets map[uint64][]any
	// compared counts equal calls, for the merger's comparison count.
	compared int
}

func newItemSet(items []any) *itemSet {
	s := &itemSet{seed: maphash.MakeSeed(), buckets: make(map[uint64][]any, len(items))}
	for _, it := range items {
		h := s.hash(it)
		s.buckets[h] = append(s.buckets[h], it)
	}
	return s
}

// contains reports whether some item of the set equals x.
func (s *itemSet) contains(x any) bool {
	for _, y := range s.buckets[s.hash(x)] {
		s.compared++
		if equal(x, y) {
			return true
		}
	}
	return false
}

func (s *itemSet) hash(v any) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	s.write(&h, v)
	return h.Sum64()
}

// write feeds v's canonical form to h: an object's entries are hashed one by one and summed,
// so that their order (random in a Go map) does not matter.
func (s *itemSet) write(h *maphash.Hash, v any) {
	var n [8]byte
	writeLen := func(l int) {
		binary.LittleEndian.PutUint64(n[:], uint64(l))
		_, _ = h.Write(n[:])
	}
	switch x := v.(type) {
	case nil:
		_ = h.WriteByte('z')
	case bool:
		if x {
			_ = h.WriteByte('t')
		} else {
			_ = h.WriteByte('f')
		}
	case string:
		_ = h.WriteByte('s')
		writeLen(len(x))
		_, _ = h.WriteString(x)
	case []any:
		_ = h.WriteByte('l')
		writeLen(len(x))
		for _, c := range x {
			s.write(h, c)
		}
	case map[string]any:
		_ = h.WriteByte('m')
		writeLen(len(x))
		var sum uint64
		for k, c := range x {
			var e maphash.Hash
			e.SetSeed(s.seed)
			binary.LittleEndian.PutUint64(n[:], uint64(len(k)))
			_, _ = e.Write(n[:])
			_, _ = e.WriteString(k)
			s.write(&e, c)
			sum += e.Sum64()
		}
		binary.LittleEndian.PutUint64(n[:], sum)
		_, _ = h.Write(n[:])
	default:
		_ = h.WriteByte('n')
		_, _ = h.WriteString(numberKey(v))
	}
}

// numberKey is a number's value as text, the same for every spelling equal finds equal:
// an integral value (1, 1.0, 1e0, -0) is its exact integer, any other float its shortest
// repr; a json.Number that is not a number equals only its own text.
func numberKey(v any) string {
	if t, ok := v.(json.Number); ok && isIntText(t) && t != "-0" {
		return "i" + string(t) // JSON integers are canonical but for -0: no parsing
	}
	num, ok := toNumber(v)
	if !ok {
		if t, isNum := v.(json.Number); isNum {
			return "x" + string(t)
		}
		return "?" // equal is false for it whatever it is compared with
	}
	if num.isInt {
		return "i" + num.i.String()
	}
	f := num.f
	if !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) {
		i, _ := new(big.Float).SetFloat64(f).Int(nil)
		return "i" + i.String()
	}
	return "f" + strconv.FormatFloat(f, 'g', -1, 64)
}
