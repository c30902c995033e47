package resource

import (
	"strconv"
	"strings"
	"sync"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/metadata"
)

// selectorMarker is where a query takes its compiled label selector.
const selectorMarker = "TRUE /*selector*/"

// compiled caches the query texts compiled per (query, selector shape): the shape is the
// sequence of operators and value counts, never the keys or values, which are bound. pgx
// prepares each distinct text once per connection.
var compiled sync.Map // string -> *db.Query

// withSelector returns base with its selector marker replaced by sel compiled to one EXISTS
// (in, exists) or NOT EXISTS (notin, !) per requirement over the labels of r.id, from the
// fixed fragments Sel* of queries.sql, and the arguments to append to base's: for each
// requirement its key prefix, key name and (for in and notin) values, numbered from first.
// Nothing of the selector's text reaches the SQL: the requirements were parsed and checked
// by metadata.ParseSelector, the keys and values are parameters. NOT EXISTS (never NOT IN)
// makes notin and !k match objects without the key. One condition per requirement, never a
// join per requirement (Cloud Foundry's PR #2499: joins took 50 s at 20 requirements).
//
// With ids, the first condition is r.id = ANY($first) (the objects a selective requirement
// names, see drive) and the requirements' parameters follow it; the caller passes the ids as
// the argument at first.
func withSelector(base *db.Query, sel metadata.Selector, first int, ids bool) (*db.Query, []any) {
	var shape strings.Builder
	shape.WriteString(base.Name)
	if ids {
		shape.WriteString("|ids")
	}
	args := make([]any, 0, 3*len(sel.Requirements))
	for _, r := range sel.Requirements {
		shape.WriteString("|" + string(r.Op))
		args = append(args, r.Prefix, r.Name)
		if r.Op == metadata.OpIn || r.Op == metadata.OpNotIn {
			args = append(args, r.Values)
		}
	}
	key := shape.String() + "@" + strconv.Itoa(first)
	if c, ok := compiled.Load(key); ok {
		return c.(*db.Query), args
	}
	conds := []string{"TRUE"}
	n := first
	if ids {
		conds = append(conds, "r.id = ANY ($"+strconv.Itoa(n)+"::bigint[])")
		n++
	}
	for _, r := range sel.Requirements {
		frag := map[metadata.Op]string{metadata.OpIn: "SelIn", metadata.OpNotIn: "SelNotIn", metadata.OpExists: "SelExists", metadata.OpNotExists: "SelNotExists"}[r.Op]
		var text string
		text, n = renumber(fragment(q.Get(frag).Text), n)
		conds = append(conds, text)
	}
	if strings.Count(base.Text, selectorMarker) != 1 {
		panic("resource: query " + base.Name + " has no selector marker")
	}
	c := &db.Query{Name: base.Name, Text: strings.Replace(base.Text, selectorMarker, strings.Join(conds, "\n  AND "), 1)}
	actual, _ := compiled.LoadOrStore(key, c)
	return actual.(*db.Query), args
}

// fragment returns a Sel* query's text without its comment lines.
func fragment(text string) string {
	var keep []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			keep = append(keep, line)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// withCounts compiles the query that reads the current resourceVersion and counts, for each
// positive requirement of sel (in, exists: the ones an object must carry a label for), the
// objects meeting it, capped at cap; it returns those requirements in the order of the
// counts. Its second column is a bigint[] of the counts.
func withCounts(base *db.Query, sel metadata.Selector, cap int) (*db.Query, []any, []metadata.Requirement) {
	var shape strings.Builder
	shape.WriteString(base.Name)
	args := []any{cap}
	var positives []metadata.Requirement
	for _, r := range sel.Requirements {
		switch r.Op {
		case metadata.OpIn:
			args = append(args, r.Prefix, r.Name, r.Values)
		case metadata.OpExists:
			args = append(args, r.Prefix, r.Name)
		default:
			continue
		}
		positives = append(positives, r)
		shape.WriteString("|" + string(r.Op))
	}
	key := shape.String()
	if c, ok := compiled.Load(key); ok {
		return c.(*db.Query), args, positives
	}
	var counts, exists []string
	n := 2
	for _, r := range positives {
		count, any := "CountExists", "ExistsExists"
		if r.Op == metadata.OpIn {
			count, any = "CountIn", "ExistsIn"
		}
		// Both fragments of one requirement take the same parameters.
		c, next := renumber(fragment(q.Get(count).Text), n)
		e, _ := renumber(fragment(q.Get(any).Text), n)
		n = next
		counts = append(counts, c)
		exists = append(exists, e)
	}
	list := "ARRAY[]::bigint[]"
	if len(counts) > 0 {
		list = "CASE WHEN " + strings.Join(exists, "\n  AND ") + "\n THEN ARRAY[" + strings.Join(counts, ",\n  ") + "]::bigint[] ELSE ARRAY[0]::bigint[] END"
	}
	if strings.Count(base.Text, countsMarker) != 1 {
		panic("resource: query " + base.Name + " has no counts marker")
	}
	c := &db.Query{Name: base.Name, Text: strings.Replace(base.Text, countsMarker, list, 1)}
	actual, _ := compiled.LoadOrStore(key, c)
	return actual.(*db.Query), args, positives
}

// countsMarker is where SelectorCounts takes its compiled counts.
const countsMarker = "NULL::bigint[] /*counts*/"

// renumber gives a fragment's placeholders $P (key prefix), $N (key name) and, when present,
// $V (values) the parameter numbers from n on, and returns the next free number.
func renumber(text string, n int) (string, int) {
	text = strings.ReplaceAll(text, "$P", "$"+strconv.Itoa(n))
	text = strings.ReplaceAll(text, "$N", "$"+strconv.Itoa(n+1))
	n += 2
	if strings.Contains(text, "$V") {
		text = strings.ReplaceAll(text, "$V", "$"+strconv.Itoa(n))
		n++
	}
	return text, n
}
