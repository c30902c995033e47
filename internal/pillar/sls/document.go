package sls

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ReadDocument reads one SLS file on its own, as `strata pillar set -f FILE` and `pillar edit`
// send it (Content-Type: application/yaml on a pillar PUT): the same rules as an SLS file of a
// tree Read imports (the renderer line, Jinja, PGP messages and Salt's YAML 1.1 typing), so a
// file gives the same pillar through `pillar set` and through `pillar import`. file names the
// document in the problems, which carry the line and column of each (a syntax error's column
// is where the parser stops). An include: is reported: it names other files of a tree, which
// only an import has. An empty or false document is {}, as in Salt.
//
// Its error is a *TooLargeError when the values expand (YAML aliases) past opts.MaxBytes;
// everything else the document holds that cannot be stored faithfully is in the returned
// problems, and the data is then nil.
func ReadDocument(file string, src []byte, opts Options) (map[string]any, []Unsupported, error) {
	r := &reader{
		files:        map[string]*loadedFile{},
		seen:         map[Unsupported]bool{},
		decrypted:    normalizeDecrypted(opts.Decrypted),
		rawDecrypted: map[filePos]bool{},
		opts:         opts,
		columns:      true,
	}
	if opts.MaxBytes > 0 {
		r.bytes = newByteBudget(opts.MaxBytes)
	}
	if !r.checkTemplate(file, src) || len(r.problems) > 0 {
		return nil, r.problems, nil
	}
	if len(bytes.TrimSpace(src)) == 0 {
		return map[string]any{}, nil, nil
	}
	l := newLoaderAt(func(line, col int, reason string) { r.problemAt(file, line, col, reason) })
	l.bytes, l.file = r.bytes, file
	v, root, _ := l.load(src)
	if err := r.overBudget(); err != nil {
		return nil, nil, err
	}
	var data map[string]any
	switch m := v.(type) {
	case map[string]any:
		data = m
		if _, ok := m["include"]; ok {
			line, col := includeKeyPos(root)
			r.problemAt(file, line, col, "include: names other SLS files of a pillar tree, which a single file cannot resolve: import the tree with strata pillar import DIR")
		}
	default:
		if truthy(v) {
			line, col := 1, 1
			if root != nil {
				line, col = root.Line, root.Column
			}
			r.problemAt(file, line, col, fmt.Sprintf("the document is %s, not a mapping: a pillar is a mapping of keys (Salt reports \"does not render to a dictionary\")", describe(v)))
		}
		data = map[string]any{}
	}
	if len(r.problems) > 0 {
		return nil, r.problems, nil
	}
	return data, nil, nil
}

// includeKeyPos is the line and column of a document's top-level include: key.
func includeKeyPos(root *yaml.Node) (int, int) {
	if root != nil && root.Kind == yaml.MappingNode {
		l := newLoader(func(int, string) {})
		for _, p := range l.flatten(root) {
			if k := deref(p.k); k != nil && k.Kind == yaml.ScalarNode && k.Value == "include" {
				return k.Line, k.Column
			}
		}
	}
	return 1, 1
}
