package sls

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// topTarget is one target of the imported environment, as Salt's merge_tops reads it.
type topTarget struct {
	expr          string
	line          int
	matcher       string
	order         *big.Int
	ignoreMissing bool
	entries       []topEntry
	target        Target
	ok            bool // the target maps to a strata target and its options are sound
}

// topEntry is one SLS entry of a target: a name or a glob of names.
type topEntry struct {
	name string
	line int
}

// readTop reads top.sls into the imported environment's targets, sorted as Salt sorts
// them, each mapped to a strata target or reported.
func (r *reader) readTop(src []byte) ([]*topTarget, error) {
	r.ignored = map[string]bool{}
	if !r.checkTemplate(topFile, src) {
		return nil, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", topFile, err)
	}
	report := func(line int, reason string) { r.problem(topFile, line, reason) }
	// The loader's pass over the whole file reports what Salt's loader refuses in it
	// (a repeated key, a duplicate anchor, ...); the walk below reads the structure.
	// Only this pass is charged to the byte budget: it builds every value of the file once,
	// the walk below reads parts of it again.
	check := r.newLoader(topFile, report)
	check.anyKeys = true
	check.load(src)
	l := newLoader(report)
	l.anyKeys = true
	var root *yaml.Node
	if len(doc.Content) > 0 {
		root = deref(doc.Content[0])
	}
	if root == nil || (root.Kind == yaml.ScalarNode && !truthy(l.value(root))) {
		r.problem(topFile, 1, fmt.Sprintf("top.sls is empty: there is no %q environment to import", r.opts.Env))
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: the top file must map environments to targets", topFile, root.Line)
	}
	var targets []*topTarget
	envs := map[string]bool{}
	for _, p := range l.flatten(root) {
		env, ok := l.key(p.k)
		if !ok || envs[env] {
			continue
		}
		envs[env] = true
		line := deref(p.k).Line
		switch {
		case env == "include":
			r.problem(topFile, line, "include: in a top file (it reads other top files) is not supported by the importer: merge them into top.sls")
			continue
		case env != r.opts.Env:
			r.problem(topFile, line, fmt.Sprintf("environment %q is not imported (importing %q): import its pillar_roots directory with that environment separately", env, r.opts.Env))
			continue
		}
		body := deref(p.v)
		if body == nil || body.Kind != yaml.MappingNode {
			r.problem(topFile, line, fmt.Sprintf("environment %q must map targets to lists; Salt cannot read this top file", env))
			continue
		}
		names := map[string]bool{}
		for _, tp := range l.flatten(body) {
			t := r.readTarget(l, tp)
			if t.expr != "" && names[t.expr] {
				continue // a repeated target, which the loader pass reported
			}
			names[t.expr] = true
			targets = append(targets, t)
		}
	}
	if !envs[r.opts.Env] {
		r.problem(topFile, 1, fmt.Sprintf("top.sls has no %q environment: nothing to import", r.opts.Env))
	}
	for _, t := range targets {
		if t.ignoreMissing {
			for _, e := range t.entries {
				r.ignored[e.name] = true
			}
		}
	}
	slices.SortStableFunc(targets, func(a, b *topTarget) int { return a.order.Cmp(b.order) })
	for _, t := range targets {
		if t.ok {
			t.target, t.ok = r.mapTarget(t)
		}
	}
	return targets, nil
}

// readTarget reads one target's expression, options and SLS entries.
func (r *reader) readTarget(l *loader, p pair) *topTarget {
	k := deref(p.k)
	t := &topTarget{line: k.Line, order: new(big.Int), matcher: "compound", ok: true}
	fail := func(line int, reason string) {
		r.problem(topFile, line, reason)
		t.ok = false
	}
	if k.Kind != yaml.ScalarNode {
		fail(k.Line, "a target must be a string")
	} else {
		v, err := constructScalar(scalarTag(k), k.Value)
		switch s, isStr := v.(string); {
		case err != nil:
			fail(k.Line, "target "+strings.TrimPrefix(scalarReason(k.Value, err), "value "))
		case !isStr:
			fail(k.Line, fmt.Sprintf("target %s is %s in Salt, not a string, so it matches no minion: quote it", quoteShort(k.Value), describe(v)))
		default:
			t.expr = s
		}
	}
	body := deref(p.v)
	if body == nil || body.Kind != yaml.SequenceNode {
		fail(k.Line, fmt.Sprintf("target %s must have a list of SLS names and options; Salt cannot read this top file", quoteShort(k.Value)))
		return t
	}
	seen := map[string]bool{}
	for _, item := range body.Content {
		it := deref(item)
		if it == nil {
			continue
		}
		switch it.Kind {
		case yaml.ScalarNode:
			v := l.value(it)
			s, isStr := v.(string)
			if !isStr {
				r.problem(topFile, it.Line, fmt.Sprintf("entry %s is %s in Salt, which ignores entries that are not strings: quote it", quoteShort(it.Value), describe(v)))
				continue
			}
			if !seen[s] { // Salt keeps a target's entries in an ordered dict
				seen[s] = true
				t.entries = append(t.entries, topEntry{name: s, line: it.Line})
			}
		case yaml.MappingNode:
			m, _ := l.value(it).(map[string]any)
			if mv, has := m["match"]; has {
				if ms, isStr := mv.(string); isStr {
					t.matcher = ms // the last match: wins, as in Salt's confirm_top
				} else {
					fail(it.Line, fmt.Sprintf("match: %s is not a matcher name", describe(mv)))
				}
			}
			if ov, has := m["order"]; has {
				o, ok := pyOrder(ov)
				if !ok {
					fail(it.Line, fmt.Sprintf("order: %s makes Salt fail to read the top file (TypeError)", describe(ov)))
				}
				t.order = o
			}
			if truthy(m["ignore_missing"]) {
				t.ignoreMissing = true
			}
		default:
			r.problem(topFile, it.Line, "a list among a target's entries: Salt ignores it")
		}
	}
	return t
}

var pyIntStrRE = regexp.MustCompile(`^[ \t\n\r\f\v]*[-+]?[0-9]+(?:_[0-9]+)*[ \t\n\r\f\v]*$`)

// pyOrder is merge_tops' reading of order: an int as it is (a bool is one), anything else
// through int(), with 0 for what int() refuses with ValueError. None, lists and mappings
// make int() raise TypeError, which fails the whole top file in Salt.
func pyOrder(v any) (*big.Int, bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return big.NewInt(1), true
		}
		return new(big.Int), true
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return new(big.Int), false
			}
			n, _ := big.NewFloat(f).Int(nil) // int() truncates toward zero
			return n, true
		}
		n, ok := new(big.Int).SetString(s, 10)
		return n, ok
	case string:
		if !pyIntStrRE.MatchString(v) {
			return new(big.Int), true
		}
		n, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(v), "_", ""), 10)
		return n, ok
	}
	return new(big.Int), false
}

// describe names a loaded value for a message, with its Python type.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "the boolean " + pyBool(v)
	case json.Number:
		return "the number " + string(v)
	case string:
		return "the string " + quoteShort(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// unsupportedMatchers explain, per Salt matcher, why no strata target can stand for it.
var unsupportedMatchers = map[string]string{
	"pcre":         "a pcre target (a Python regular expression on minion ids): the importer does not translate regular expressions into groups",
	"grain":        "a grain target: grains are facts minions report, which strata does not store, so no group can follow them (and a minion can lie about its grains to read such pillar data)",
	"grain_pcre":   "a grain_pcre target: grains are facts minions report, which strata does not store",
	"pillar":       "a pillar target: it depends on pillar data compiled before the top file is matched",
	"pillar_pcre":  "a pillar_pcre target: it depends on pillar data compiled before the top file is matched",
	"pillar_exact": "a pillar_exact target: it depends on pillar data compiled before the top file is matched",
	"ipcidr":       "an ipcidr target: it matches minion IP addresses, which strata does not store",
	"data":         "a data target: it matches the minion data store, which strata does not read",
	"range":        "a range target: it asks a SECO range server",
}

// compoundEngines maps a compound word's engine letter to its matcher.
var compoundEngines = map[byte]string{
	'G': "grain", 'P': "grain_pcre", 'I': "pillar", 'J': "pillar_pcre",
	'L': "list", 'N': "nodegroup", 'S': "ipcidr", 'E': "pcre", 'R': "range",
}

// members is what one target expression (or one term of a compound "or") stands for.
type members struct {
	global   bool
	ids      []string
	snapshot bool
}

// mapTarget maps a target to the global layer, a node or a group.
func (r *reader) mapTarget(t *topTarget) (Target, bool) {
	bad := func(reason string) (Target, bool) {
		r.problem(topFile, t.line, reason)
		return Target{}, false
	}
	var m members
	var ok bool
	kind := t.matcher
	switch t.matcher {
	case "glob":
		m, ok = r.globMembers(t.expr, t.line)
	case "list":
		m, ok = r.listMembers(t.expr, t.line)
	case "nodegroup":
		m, ok = r.nodegroupMembers(t.expr, t.line)
	case "compound":
		m, kind, ok = r.compoundMembers(t.expr, t.line)
	default:
		if reason, known := unsupportedMatchers[t.matcher]; known {
			return bad(reason)
		}
		return bad(fmt.Sprintf("match: %s: Salt has no such matcher", quoteShort(t.matcher)))
	}
	if !ok {
		return Target{}, false
	}
	switch {
	case m.global:
		return Target{Kind: "global", Match: t.expr}, true
	case kind == "glob" && !m.snapshot && len(m.ids) == 1:
		return Target{Kind: "node", Name: m.ids[0], Match: t.expr}, true
	}
	name := t.expr
	if kind == "nodegroup" && t.matcher == "compound" {
		name = strings.TrimSpace(name)[len("N@"):] // a group named after the nodegroup
	}
	return Target{Kind: "group", Name: groupName(kind, name), Members: m.ids, Match: t.expr, Snapshot: m.snapshot}, true
}

// globMembers reads a glob on minion ids (Salt's glob matcher, fnmatch): '*' is
// everything, a glob without metacharacters one minion id, any other glob the known nodes
// it matches.
func (r *reader) globMembers(pat string, line int) (members, bool) {
	switch {
	case pat == "*":
		return members{global: true}, true
	case !hasGlobMeta(pat):
		if strings.Contains(pat, ",") && !strings.ContainsAny(pat, " \t") {
			r.problem(topFile, line, fmt.Sprintf("target %s is read by Salt as one glob (the default compound matcher splits only on spaces), and no minion id has a comma, so it matches nothing; add \"- match: list\" (or write L@%s) if a list was meant", quoteShort(pat), pat))
			return members{}, false
		}
		if !validNode(pat) {
			r.problem(topFile, line, fmt.Sprintf("target %s is not a minion id strata can hold (1-253 of A-Z a-z 0-9 . _ -)", quoteShort(pat)))
			return members{}, false
		}
		return members{ids: []string{pat}}, true
	case r.opts.KnownNodes == nil:
		r.problem(topFile, line, fmt.Sprintf("glob target %s: expanding it needs the known nodes (Options.KnownNodes); strata's label selectors cannot match names by pattern", quoteShort(pat)))
		return members{}, false
	}
	ids := []string{}
	for _, n := range r.opts.KnownNodes {
		if r.match(n, pat) {
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	return members{ids: slices.Compact(ids), snapshot: true}, true
}

// listMembers reads Salt's list matcher: comma-separated exact minion ids, compared with
// no trimming, so "a, b" never matches b.
func (r *reader) listMembers(expr string, line int) (members, bool) {
	ids := []string{}
	for _, id := range strings.Split(expr, ",") {
		if id == "" {
			continue
		}
		if !validNode(id) {
			r.problem(topFile, line, fmt.Sprintf("list target %s: %s never matches a minion (Salt's list matcher compares exact ids, spaces included; strata node names are 1-253 of A-Z a-z 0-9 . _ -)", quoteShort(expr), quoteShort(id)))
			return members{}, false
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return members{ids: slices.Compact(ids)}, true
}

// nodegroupMembers reads a nodegroup from Options.Nodegroups.
func (r *reader) nodegroupMembers(name string, line int) (members, bool) {
	list, ok := r.opts.Nodegroups[name]
	if !ok {
		r.problem(topFile, line, fmt.Sprintf("nodegroup %s is not in Options.Nodegroups (the master's nodegroups as lists of minion ids)", quoteShort(name)))
		return members{}, false
	}
	ids := []string{}
	for _, id := range list {
		if !validNode(id) {
			r.problem(topFile, line, fmt.Sprintf("nodegroup %s: member %s is not a minion id strata can hold", quoteShort(name), quoteShort(id)))
			return members{}, false
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return members{ids: slices.Compact(ids)}, true
}

// compoundMembers reads Salt's default top-file matcher. A single word without an engine
// prefix is a glob; "L@a,b" a list; "N@name" a nodegroup. Words joined by "or" are the
// union of their terms. "and", "not", parentheses and the other engines are reported.
func (r *reader) compoundMembers(expr string, line int) (members, string, bool) {
	words := strings.Fields(expr)
	if len(words) == 0 {
		r.problem(topFile, line, "an empty target matches no minion")
		return members{}, "", false
	}
	for i, w := range words {
		isOp := w == "and" || w == "or" || w == "not" || w == "(" || w == ")"
		if (i%2 == 1) != isOp || (isOp && w != "or") {
			r.problem(topFile, line, fmt.Sprintf("compound target %s: the importer maps only terms joined by \"or\", not and/not/parentheses", quoteShort(expr)))
			return members{}, "", false
		}
	}
	var union members
	kind := "compound"
	for i := 0; i < len(words); i += 2 {
		m, k, ok := r.compoundTerm(words[i], line)
		if !ok {
			return members{}, "", false
		}
		if len(words) == 1 {
			kind = k
		}
		union.global = union.global || m.global
		union.snapshot = union.snapshot || m.snapshot
		union.ids = append(union.ids, m.ids...)
	}
	slices.Sort(union.ids)
	union.ids = slices.Compact(union.ids)
	if union.global {
		union = members{global: true}
	}
	return union, kind, true
}

// compoundTerm reads one word of a compound target as Salt's parse_target does: an
// engine letter (with a delimiter character for G, P, I and J) and '@', or a glob.
func (r *reader) compoundTerm(word string, line int) (members, string, bool) {
	engine, pattern := byte(0), word
	switch {
	case len(word) > 2 && word[1] == '@' && compoundEngines[word[0]] != "":
		engine, pattern = word[0], word[2:]
	case len(word) > 3 && word[2] == '@' && strings.IndexByte("GPIJ", word[0]) >= 0:
		engine, pattern = word[0], word[3:]
	}
	switch matcher := compoundEngines[engine]; matcher {
	case "":
		m, ok := r.globMembers(word, line)
		return m, "glob", ok
	case "list":
		m, ok := r.listMembers(pattern, line)
		return m, "list", ok
	case "nodegroup":
		m, ok := r.nodegroupMembers(pattern, line)
		return m, "nodegroup", ok
	default:
		r.problem(topFile, line, fmt.Sprintf("%s (compound word %s)", unsupportedMatchers[matcher], quoteShort(word)))
		return members{}, "", false
	}
}
