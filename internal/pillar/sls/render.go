package sls

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/internal/pillar/merge"
)

// loadedFile is one SLS file read and typed, once per Read.
type loadedFile struct {
	data     map[string]any // the file's mapping ({} for an empty or false document)
	ok       bool           // nothing in the file was reported
	includes []includeItem  // where the include: items are, for messages
	incLine  int            // the line of the include: key
	// placement is the row a file strata exported holds (its strata-export comment).
	placement     *Placement
	placementLine int
	// secret: a value of the file is the plaintext of a PGP message (Options.Decrypted).
	secret bool
}

// includeItem locates one item of an include: list. A mapping item's first key is kept
// because Salt takes the first key of such an item and a Go map forgets the order.
type includeItem struct {
	line     int
	firstKey string
	hasKey   bool
}

// rendered is one SLS rendered as Salt's render_pstate renders it for a minion that has
// only that SLS.
type rendered struct {
	data    map[string]any
	sources []string
	ok      bool // no file it needs was reported
	missing bool // the SLS does not exist and ignore_missing covers it
}

// shebang pipelines (salt/template.py OLD_STYLE_RENDERERS) the importer reads.
var oldStyleRenderers = map[string]string{
	"yaml_jinja": "jinja|yaml", "yaml_mako": "mako|yaml", "yaml_wempy": "wempy|yaml",
	"json_jinja": "jinja|json", "json_mako": "mako|json", "json_wempy": "wempy|json",
	"yamlex_jinja": "jinja|yamlex",
}

// checkTemplate looks at a file the way Salt's compile_template picks its renderers and
// reports what the importer cannot read: a renderer pipeline other than yaml or
// jinja|yaml (optionally followed by gpg), Jinja syntax when Jinja renders the file, and
// PGP messages that Options.Decrypted does not hold. It returns whether the file is worth
// parsing as YAML.
func (r *reader) checkTemplate(file string, src []byte) bool {
	if len(bytes.TrimSpace(src)) == 0 {
		return true // compile_template returns {} before any renderer
	}
	first, _, _ := bytes.Cut(src, []byte("\n"))
	pipeline := []string{"jinja", "yaml"} // the master's default renderer
	if bytes.HasPrefix(first, []byte("#!")) && !bytes.HasPrefix(first, []byte("#!/")) {
		pipe := strings.TrimSpace(string(first))[2:]
		parts := strings.Split(pipe, "|")
		if len(parts) == 1 {
			if old, ok := oldStyleRenderers[pipe]; ok {
				parts = strings.Split(old, "|")
			}
		}
		pipeline = pipeline[:0]
		for _, p := range parts {
			name, args, _ := strings.Cut(strings.TrimSpace(p)+" ", " ")
			if strings.TrimSpace(args) != "" {
				name += " " + strings.TrimSpace(args)
			}
			pipeline = append(pipeline, name)
		}
		base := strings.Join(slices.DeleteFunc(slices.Clone(pipeline), func(s string) bool { return s == "gpg" }), "|")
		gpgLast := !slices.Contains(pipeline[:len(pipeline)-1], "gpg")
		if (base != "yaml" && base != "jinja|yaml") || !gpgLast {
			r.problemAt(file, 1, 1, fmt.Sprintf("renderer pipeline %s: the importer reads only yaml and jinja|yaml files (Salt renders %s at compile time)", quoteShort(pipe), describePipe(pipeline)))
			return false
		}
	}
	lines := bytes.Split(src, []byte("\n"))
	if slices.Contains(pipeline, "jinja") {
		var at []int
		var marker string
		col := 0
		for i, ln := range lines {
			for _, m := range []string{"{{", "{%", "{#"} {
				if j := bytes.Index(ln, []byte(m)); j >= 0 {
					if at == nil {
						marker, col = m, 1+utf8.RuneCount(ln[:j])
					}
					at = append(at, i+1)
					break
				}
			}
		}
		if at != nil {
			reason := fmt.Sprintf("Jinja template syntax %q: Salt renders this file per minion, so it has no single value to import", marker)
			if len(at) > 1 {
				reason += " (also on lines " + joinLines(at[1:], 10) + ")"
			}
			r.problemAt(file, at[0], col, reason)
			return false
		}
	}
	for _, b := range FindPGPBlocks(src) {
		if _, ok := r.decrypted[b.Armored]; ok {
			r.rawDecrypted[filePos{file, b.Line}] = true // its value is decrypted once parsed
			continue
		}
		col := 0
		if b.Line-1 < len(lines) {
			if j := bytes.Index(lines[b.Line-1], []byte("-----BEGIN PGP MESSAGE-----")); j >= 0 {
				col = 1 + utf8.RuneCount(lines[b.Line-1][:j])
			}
		}
		r.problemAt(file, b.Line, col, pgpRefused)
	}
	return true // PGP blocks are reported, and the rest of the file is still checked
}

func describePipe(p []string) string {
	for _, name := range p {
		switch {
		case name == "py" || name == "pyobjects" || name == "pydsl":
			return "Python code"
		case name == "mako" || name == "wempy" || name == "cheetah" || name == "genshi" || name == "jinja":
			return "a template"
		}
	}
	return "it with another renderer"
}

func joinLines(lines []int, limit int) string {
	var parts []string
	for i, n := range lines {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(lines)-limit))
			break
		}
		parts = append(parts, fmt.Sprint(n))
	}
	return strings.Join(parts, ", ")
}

// load reads, checks and types one SLS file, once.
func (r *reader) load(rel string) *loadedFile {
	if f, ok := r.files[rel]; ok {
		return f
	}
	f := &loadedFile{data: map[string]any{}, ok: true}
	r.files[rel] = f
	report := func(line int, reason string) {
		r.problem(rel, line, reason)
		f.ok = false
	}
	src, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(rel)))
	if err != nil {
		report(1, "cannot read the file: "+err.Error())
		return f
	}
	if p, line, err := readPlacement(src); err != nil {
		report(line, err.Error())
	} else {
		f.placement, f.placementLine = p, line
	}
	before := len(r.problems)
	if !r.checkTemplate(rel, src) {
		f.ok = false
		return f
	}
	if len(r.problems) > before {
		f.ok = false // PGP blocks
	}
	if len(bytes.TrimSpace(src)) == 0 {
		return f
	}
	l := r.newLoader(rel, report)
	if len(r.decrypted) > 0 {
		srcLines := strings.Split(string(src), "\n")
		l.str = func(line int, s string) string {
			s, secret := r.decryptValue(rel, srcLines, line, s, report)
			f.secret = f.secret || secret
			return s
		}
	}
	v, root, ok := l.load(src)
	if !ok {
		f.ok = false
	}
	switch m := v.(type) {
	case map[string]any:
		f.data = m
		f.readIncludes(root)
	default:
		if truthy(v) { // Salt's yaml renderer turns a false document into {}
			line := 1
			if root != nil {
				line = root.Line
			}
			report(line, fmt.Sprintf("the file is %s, not a mapping: Salt reports \"does not render to a dictionary\"", describe(v)))
		}
	}
	return f
}

// readIncludes notes where the include: list and its items are.
func (f *loadedFile) readIncludes(root *yaml.Node) {
	if root == nil || root.Kind != yaml.MappingNode {
		return
	}
	l := newLoader(func(int, string) {}) // the file's problems are already reported
	for _, p := range l.flatten(root) {
		k := deref(p.k)
		if k == nil || k.Kind != yaml.ScalarNode || k.Value != "include" || scalarTag(k) != tagStr {
			continue
		}
		f.incLine = k.Line
		f.includes = nil
		v := deref(p.v)
		if v == nil || v.Kind != yaml.SequenceNode {
			continue
		}
		for _, item := range v.Content {
			it := deref(item)
			inc := includeItem{line: item.Line}
			if it != nil && it.Kind == yaml.MappingNode {
				if pairs := l.flatten(it); len(pairs) > 0 {
					if key, ok := l.key(pairs[0].k); ok {
						inc.firstKey, inc.hasKey = key, true
					}
				}
			}
			f.includes = append(f.includes, inc)
		}
	}
}

// locate is Salt's get_state: "a.b" is a/b.sls, else a/b/init.sls. Dots become slashes
// only when the name's last path element has one, as in Salt. A name that would leave the
// directory is not found.
func (r *reader) locate(sls string) (string, bool) {
	name := sls
	if strings.Contains(name[strings.LastIndex(name, "/")+1:], ".") {
		name = strings.ReplaceAll(name, ".", "/")
	}
	name = strings.TrimLeft(name, "/")
	for _, rel := range []string{name + ".sls", name + "/init.sls"} {
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			continue
		}
		info, err := os.Stat(filepath.Join(r.dir, filepath.FromSlash(rel)))
		if err == nil && info.Mode().IsRegular() {
			return filepath.ToSlash(filepath.Clean(rel)), true
		}
	}
	return "", false
}

// renderTop renders an SLS listed (or matched by a glob) in top.sls at line, once per
// Read: with a fresh render cache each time its result does not depend on the target.
func (r *reader) renderTop(sls string, line int) rendered {
	if res, ok := r.rendered[sls]; ok {
		if res.missing && !r.ignored[sls] {
			r.missingSLS(topFile, line, sls)
		}
		return res
	}
	res := r.pstate(sls, map[string]map[string]any{}, topFile, line)
	r.rendered[sls] = res
	return res
}

func (r *reader) missingSLS(file string, line int, sls string) {
	r.problem(file, line, fmt.Sprintf("SLS %s does not exist (neither %s.sls nor %s/init.sls): Salt reports it in _errors", quoteShort(sls), strings.ReplaceAll(sls, ".", "/"), strings.ReplaceAll(sls, ".", "/")))
}

// pstate is Salt's render_pstate: the SLS file's data with its include: list resolved
// and merged. mods is Salt's per-compile cache of rendered SLS (their own data, includes
// removed), which also ends include cycles: an SLS already in it is not rendered again.
// file and line say where the SLS was asked for, for a missing-SLS report.
func (r *reader) pstate(sls string, mods map[string]map[string]any, file string, line int) rendered {
	rel, found := r.locate(sls)
	if !found {
		if r.ignored[sls] {
			return rendered{ok: true, missing: true}
		}
		r.missingSLS(file, line, sls)
		return rendered{missing: true}
	}
	f := r.load(rel)
	state := merge.Copy(f.data).(map[string]any)
	res := rendered{ok: f.ok}
	incRaw, hasInc := state["include"]
	if !truthy(state) || !hasInc {
		mods[sls] = state
		res.data, res.sources = state, []string{rel}
		return res
	}
	delete(state, "include")
	mods[sls] = state
	incList, isList := incRaw.([]any)
	if !isList {
		r.problem(rel, f.incLine, "include: must be a list: Salt reports \"Include Declaration ... is not formed as a list\"")
		return rendered{sources: []string{rel}}
	}
	var layers []map[string]any
	var sources []string
	own := state
	for i, item := range incList {
		at := f.incLine
		var info includeItem
		if i < len(f.includes) {
			info = f.includes[i]
			at = info.line
		}
		name, key, ok := r.includeEntry(rel, at, item, info)
		if !ok {
			res.ok = false
			continue
		}
		for _, m := range r.includeMatches(sls, rel, name) {
			var nstate map[string]any
			var nsrc []string
			if cached, done := mods[m]; done {
				nstate = cached
				if p, ok := r.locate(m); ok {
					nsrc = []string{p}
				}
			} else {
				sub := r.pstate(m, mods, rel, at)
				if !sub.ok {
					res.ok = false
				}
				nstate, nsrc = sub.data, sub.sources
			}
			sources = append(sources, nsrc...)
			if !truthy(nstate) {
				continue
			}
			if !r.chargeCopy(nstate, rel, at) {
				return rendered{sources: []string{rel}} // Read stops: over budget
			}
			if key != "" {
				parts := strings.Split(key, ":")
				for k := len(parts) - 1; k >= 0; k-- {
					nstate = map[string]any{parts[k]: nstate}
				}
			}
			if r.opts.IncludesOverrideSLS {
				own = merge.Recurse(own, nstate, r.opts.MergeLists)
			} else {
				layers = append(layers, nstate)
			}
		}
	}
	if r.opts.IncludesOverrideSLS {
		res.data = own
	} else {
		// The included states first, the including file's own data last and winning.
		layers = append(layers, own)
		merged := layers[0]
		for _, l := range layers[1:] {
			merged = merge.Recurse(merged, l, r.opts.MergeLists)
		}
		res.data = merged
	}
	res.sources = lastOccurrences(append(sources, rel))
	return res
}

// includeEntry reads one include: item: a name, or a one-key mapping {name: {key: "a:b",
// defaults: {...}}}. defaults only feed Jinja, which the importer never runs, so they are
// checked for the shape Salt needs and otherwise ignored.
func (r *reader) includeEntry(file string, line int, item any, info includeItem) (name, key string, ok bool) {
	switch v := item.(type) {
	case string:
		return v, "", true
	case map[string]any:
		if !info.hasKey {
			r.problem(file, line, "an include: item that is an empty mapping: Salt fails on it")
			return "", "", false
		}
		opts, isMap := v[info.firstKey].(map[string]any)
		if !isMap {
			r.problem(file, line, fmt.Sprintf("include: %s needs a mapping of key/defaults: Salt fails on %s", quoteShort(info.firstKey), describe(v[info.firstKey])))
			return "", "", false
		}
		if d, has := opts["defaults"]; has && d != nil {
			if _, isMap := d.(map[string]any); !isMap {
				r.problem(file, line, fmt.Sprintf("include: %s has defaults that are %s, not a mapping: Salt fails on it", quoteShort(info.firstKey), describe(d)))
				return "", "", false
			}
		}
		switch k := opts["key"].(type) {
		case nil:
		case string:
			key = k
		default:
			r.problem(file, line, fmt.Sprintf("include: %s has a key that is %s, not a string: Salt fails on it", quoteShort(info.firstKey), describe(k)))
			return "", "", false
		}
		return info.firstKey, key, true
	}
	r.problem(file, line, fmt.Sprintf("an include: item that is %s: Salt fails on it", describe(item)))
	return "", "", false
}

// includeMatches resolves an include name exactly as render_pstate does. The name with
// its leading dots stripped and '/' read as '.' is matched as a glob against the available
// SLS; then a relative name (".x") is resolved against the including SLS (its own name
// when it is an init.sls, its parent otherwise) and the name, resolved or not, is matched
// again and the matches appended. So a plain include "common" yields "common" twice (Salt
// renders it, then takes its cached own data again, which changes nothing under its merge),
// and ".common" includes a top-level "common" as well as the sibling. With no match at all
// the resolved name itself is rendered, which reports it missing.
func (r *reader) includeMatches(sls, rel, name string) []string {
	matched := r.filter(strings.ReplaceAll(strings.TrimLeft(name, "."), "/", "."))
	if strings.HasPrefix(name, ".") {
		parts := strings.Split(sls, ".")
		if !(rel == "init.sls" || strings.HasSuffix(rel, "/init.sls")) {
			parts = parts[:len(parts)-1]
		}
		name = strings.Join(append(parts, name[1:]), ".")
	}
	matched = append(matched, r.filter(name)...)
	if len(matched) == 0 {
		return []string{name}
	}
	return matched
}

// lastOccurrences keeps each file once, at its last position: its strongest in the merge.
func lastOccurrences(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for i := len(files) - 1; i >= 0; i-- {
		if !seen[files[i]] {
			seen[files[i]] = true
			out = append(out, files[i])
		}
	}
	slices.Reverse(out)
	return out
}
