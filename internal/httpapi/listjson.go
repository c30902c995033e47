package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stratahq/strata/api"
)

// Encoding a page of a list with encoding/json was half of the list path's CPU once pages
// came from memory (reflection, a sorted copy of every labels map, compacting every spec):
// appendObjectList writes the very bytes json.Marshal writes for a api.ObjectList
// (TestListJSONIsEncodingJSON checks it on odd objects), without reflection, and falls back to
// encoding/json for anything beyond plain printable ASCII strings and compact JSON values.

var listBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// writeObjectList answers one page of a list, as writeJSON(w, status, l) would.
func writeObjectList(w http.ResponseWriter, status int, l api.ObjectList) error {
	bp := listBuffers.Get().(*[]byte)
	b := appendObjectList((*bp)[:0], l)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if cap(b) <= 1<<20 {
		*bp = b
		listBuffers.Put(bp)
	}
	return nil
}

// appendObjectList appends json.Marshal(l) to dst.
func appendObjectList(dst []byte, l api.ObjectList) []byte {
	dst = append(dst, `{"items":`...)
	if l.Items == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range l.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendObject(dst, &l.Items[i])
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"resourceVersion":`...)
	dst = appendString(dst, l.ResourceVersion)
	if l.Continue != "" {
		dst = append(dst, `,"continue":`...)
		dst = appendString(dst, l.Continue)
	}
	return append(dst, '}')
}

// appendObject appends json.Marshal(o) to dst.
func appendObject(dst []byte, o *api.Object) []byte {
	m := &o.Metadata
	dst = append(dst, `{"kind":`...)
	dst = appendString(dst, o.Kind)
	dst = append(dst, `,"metadata":{"name":`...)
	dst = appendString(dst, m.Name)
	if m.UID != "" {
		dst = append(dst, `,"uid":`...)
		dst = appendString(dst, m.UID)
	}
	if m.Org != "" {
		dst = append(dst, `,"org":`...)
		dst = appendString(dst, m.Org)
	}
	dst = append(dst, `,"labels":`...)
	dst = appendMap(dst, m.Labels)
	dst = append(dst, `,"annotations":`...)
	dst = appendMap(dst, m.Annotations)
	if m.ResourceVersion != "" {
		dst = append(dst, `,"resourceVersion":`...)
		dst = appendString(dst, m.ResourceVersion)
	}
	if m.SchemaRevision != 0 {
		dst = append(dst, `,"schemaRevision":`...)
		dst = strconv.AppendInt(dst, int64(m.SchemaRevision), 10)
	}
	if m.CreatedAt != nil {
		dst = append(dst, `,"createdAt":`...)
		dst = appendTime(dst, *m.CreatedAt)
	}
	if m.UpdatedAt != nil {
		dst = append(dst, `,"updatedAt":`...)
		dst = appendTime(dst, *m.UpdatedAt)
	}
	dst = append(dst, '}')
	if len(o.Spec) > 0 {
		dst = append(dst, `,"spec":`...)
		dst = appendRaw(dst, o.Spec)
	}
	if len(o.Status) > 0 {
		dst = append(dst, `,"status":`...)
		dst = appendRaw(dst, o.Status)
	}
	return append(dst, '}')
}

// appendMap appends a string map with its keys sorted, as encoding/json writes maps.
func appendMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var stack [16]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

// plain reports whether encoding/json writes s between quotes as it is: printable ASCII
// without the characters it escapes (", \ and, as HTML-safe output, <, > and &).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func appendString(dst []byte, s string) []byte {
	if plain(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// appendRaw appends a JSON value as encoding/json writes a json.RawMessage: compacted, with
// <, > and & escaped (and U+2028, U+2029). A value that holds none of those bytes nor
// whitespace (the list index keeps specs compact) is written as it is.
func appendRaw(dst []byte, raw json.RawMessage) []byte {
	quick := true
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xe2:
			quick = false
		}
		if !quick {
			break
		}
	}
	if quick {
		return append(dst, raw...)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return append(dst, raw...) // cannot happen for what the database stored
	}
	return append(dst, b...)
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds).
func appendTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		b, _ := json.Marshal(t)
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}
