package sls

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/pillar/merge"
)

// Target is where a row of the plan goes: the global layer, one node, or a group.
type Target struct {
	// Kind is "global", "node" or "group"; "org" only for a row a strata-export comment
	// places (Placed).
	Kind string `json:"kind"`
	// Name is the node's minion id or the group's name ("" for global). Group names are
	// generated (see the package doc) except for nodegroups whose name is already valid.
	Name string `json:"name,omitempty"`
	// Members are a group's static members (minion ids), sorted.
	Members []string `json:"members,omitempty"`
	// Selector is a group's label selector. No Salt matcher maps onto label equality
	// faithfully (strata's node labels are not Salt grains), so the reader never sets it;
	// the field is there for the applier's sake.
	Selector string `json:"selector,omitempty"`
	// Match is the top.sls target expression the target came from.
	Match string `json:"match"`
	// Snapshot marks a group whose Members came from expanding a glob against
	// Options.KnownNodes: a node created later that the glob would match does not join it,
	// unlike in Salt. The plan printout must say so.
	Snapshot bool `json:"snapshot,omitempty"`
	// Placed marks a target a strata-export comment named (Placement): Org is then the
	// group's or the node's org, and a group with a Selector gets no static Members (they
	// are its members at export time, for Salt).
	Placed   bool   `json:"placed,omitempty"`
	Org      string `json:"org,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// PlacedAt is the file and line of the strata-export comment ("x.sls:2") of a Placed
	// target, so that an importer refusing the placement (a node claimed for an org it is
	// not in) names the comment.
	PlacedAt string `json:"-"`
}

// Row is one pillar row to write: the data of one SLS for one target.
type Row struct {
	Target   Target `json:"target"`
	Category string `json:"category"` // the SLS name, mapped to strata's category rule
	// Data is the SLS file's data with its includes merged as Salt merges them, typed as
	// Salt's YAML 1.1 loader types it: nil, bool, string, json.Number (integers of any
	// size with their exact digits; floats in Python's repr, always with a '.' or an
	// exponent), []any and map[string]any.
	Data map[string]any `json:"data"`
	// Sources are the files read for the row, relative to the directory, in the order
	// Salt merges them: included files first, the SLS's own file last.
	Sources []string `json:"sources"`
	// Secret marks a row that needs a file with a value decrypted from a PGP message
	// (Options.Decrypted), its own or an include: the importer stores such rows in a secret
	// category. It errs on the safe side: a decrypted value the merge overrides still counts.
	Secret bool `json:"secret,omitempty"`

	entry string // the top.sls entry the SLS came from (a name or a glob), for SaltLayers
}

// Unsupported is something the reader cannot translate faithfully, at its file (relative
// to the directory) and 1-based line. Column is the 1-based column where known (always for
// ReadDocument, whose one file is named by file:line:column as PyYAML names it), else 0.
type Unsupported struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
	Reason string `json:"reason"`
}

func (u Unsupported) String() string {
	if u.Column > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", u.File, u.Line, u.Column, u.Reason)
	}
	return fmt.Sprintf("%s:%d: %s", u.File, u.Line, u.Reason)
}

// Plan is what a pillar tree becomes: rows in the order Salt merges them, and everything
// that could not be translated. A row needing a file with an Unsupported entry is left
// out, whole; see the package doc.
type Plan struct {
	Rows        []Row         `json:"rows"`
	Unsupported []Unsupported `json:"unsupported"`
	Env         string        `json:"env"`
}

// Options describe the Salt master the tree belongs to.
type Options struct {
	// Env is the pillar environment (top.sls section) to import; "" means "base".
	Env string
	// Nodegroups are the master's nodegroups as lists of minion ids. A nodegroup target
	// not listed here is reported, not guessed.
	Nodegroups map[string][]string
	// KnownNodes, when not nil, are the minion ids a glob target is expanded against (into
	// a snapshot group). When nil, glob targets are reported.
	KnownNodes []string
	// MergeLists is the master's pillar_merge_lists, which Salt also applies when it merges
	// an SLS file's includes.
	MergeLists bool
	// IncludesOverrideSLS is the master's pillar_includes_override_sls: included files win
	// over the including one.
	IncludesOverrideSLS bool
	// Decrypted maps armored PGP messages (keyed as NormalizeArmor keys them) to their
	// plaintext, which the CLI got from gpg with the operator's keys: the server never holds
	// a private key. A string value holding such messages gets their plaintext as Salt's gpg
	// renderer gives it, and its row is marked Secret; a message not in the map is reported
	// as without it. Entries no value uses are ignored: the CLI decrypts every block of
	// every file it sends, also in comments and in files top.sls does not reach, which Salt
	// never decrypts either.
	Decrypted map[string]string
	// MaxBytes, when positive, bounds the bytes the tree's values may expand to (strings,
	// numbers and keys, plus one byte per value, each alias counted every time it is
	// expanded): the server passes its request body limit, so that a small tree of YAML
	// aliases cannot become rows many times the size of the request. Rows and include
	// copies may add up to CopyFactor times it. Read stops with a *TooLargeError as soon as
	// either budget is spent.
	MaxBytes int64
}

// Read turns the pillar tree in dir (one environment's pillar_roots directory, holding
// top.sls) into a Plan. Its error is only for I/O and for a top.sls that is not YAML at all
// or not a mapping; everything else the tree holds that cannot be imported faithfully is in
// Plan.Unsupported.
func Read(dir string, opts Options) (Plan, error) {
	if opts.Env == "" {
		opts.Env = "base"
	}
	r := &reader{
		dir:      dir,
		opts:     opts,
		files:    map[string]*loadedFile{},
		rendered: map[string]rendered{},
		globs:    map[string]func(string) bool{},
		seen:     map[Unsupported]bool{},

		decrypted:    normalizeDecrypted(opts.Decrypted),
		rawDecrypted: map[filePos]bool{},
	}
	if opts.MaxBytes > 0 {
		r.bytes = newByteBudget(opts.MaxBytes)
	}
	src, err := os.ReadFile(filepath.Join(dir, topFile))
	if err != nil {
		return Plan{}, fmt.Errorf("read the pillar top file: %w", err)
	}
	if r.avail, err = listSLS(dir); err != nil {
		return Plan{}, err
	}
	targets, err := r.readTop(src)
	if err != nil {
		return Plan{}, err
	}
	if err := r.overBudget(); err != nil {
		return Plan{}, err
	}
	plan := Plan{Env: opts.Env, Rows: []Row{}, Unsupported: []Unsupported{}}
	placed := map[string]bool{} // target kind/name + category already in the plan
	for _, t := range targets {
		for _, e := range t.entries {
			for _, name := range r.expand(e.name) {
				res := r.renderTop(name, e.line)
				if err := r.overBudget(); err != nil {
					return Plan{}, err
				}
				if !res.ok || !t.ok || res.missing {
					continue
				}
				if !r.chargeCopy(res.data, topFile, e.line) {
					return Plan{}, r.overBudget()
				}
				row := Row{
					Target:   t.target,
					Category: category(name),
					Data:     merge.Copy(res.data).(map[string]any),
					Sources:  slices.Clone(res.sources),
					entry:    e.name,
				}
				for _, src := range row.Sources {
					if f := r.files[src]; f != nil && f.secret {
						row.Secret = true
					}
				}
				if rel, ok := r.locate(name); ok {
					if f := r.files[rel]; f != nil && f.placement != nil {
						tg, cat, why := place(f.placement, t.target)
						if why != "" {
							r.problem(rel, f.placementLine, why)
							continue
						}
						tg.PlacedAt = fmt.Sprintf("%s:%d", rel, f.placementLine)
						row.Target, row.Category = tg, cat
					}
				}
				key := row.Target.Kind + "\x00" + row.Target.Org + "\x00" + row.Target.Name + "\x00" + row.Category
				if placed[key] {
					continue // the same SLS through an equivalent target: Salt renders it once
				}
				placed[key] = true
				plan.Rows = append(plan.Rows, row)
			}
		}
	}
	plan.Unsupported = append(plan.Unsupported, r.problems...)
	slices.SortFunc(plan.Unsupported, func(a, b Unsupported) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Reason, b.Reason))
	})
	return plan, nil
}

// SaltLayers returns the rows that apply to a minion, in the order Salt merges them for
// it: the plan's order (top.sls targets by their order: value, then as written; SLS entries
// as written; a glob entry's matches sorted), keeping only the first row of each top.sls
// entry, as Salt's top_matches does. Folding their Data with Salt's merge gives the pillar
// Salt compiled from the imported files for that minion (before ext_pillars), which the
// applier can compare with strata's own merge of the same rows to prove the import
// faithful node by node.
func (p Plan) SaltLayers(minion string) []Row {
	var out []Row
	first := map[string]string{} // entry -> the Match of the first target that listed it
	for _, row := range p.Rows {
		if !row.Target.applies(minion) {
			continue
		}
		if m, ok := first[row.entry]; ok && m != row.Target.Match {
			continue
		}
		first[row.entry] = row.Target.Match
		out = append(out, row)
	}
	return out
}

func (t Target) applies(minion string) bool {
	switch t.Kind {
	case "global":
		return true
	case "node":
		return t.Name == minion
	case "group", "org":
		return slices.Contains(t.Members, minion)
	}
	return false
}

const topFile = "top.sls"

// reader holds one Read's state.
type reader struct {
	dir      string
	opts     Options
	avail    []string // SLS names in the tree, sorted, as Salt's list_states gives them
	ignored  map[string]bool
	files    map[string]*loadedFile
	rendered map[string]rendered
	globs    map[string]func(string) bool
	problems []Unsupported
	seen     map[Unsupported]bool
	// decrypted is Options.Decrypted keyed by NormalizeArmor; rawDecrypted are the lines of
	// the BEGIN markers whose block, as the file's text shows it, is in it.
	decrypted    map[string]string
	rawDecrypted map[filePos]bool
	// bytes is the Read's byte budget (Options.MaxBytes), nil without one.
	bytes *byteBudget
	// columns: problems name their column too (ReadDocument).
	columns bool
}

// overBudget is the error that ends a Read whose values passed Options.MaxBytes, or nil.
func (r *reader) overBudget() error {
	if r.bytes == nil || r.bytes.err == nil {
		return nil
	}
	return r.bytes.err
}

// chargeCopy charges a copy of v, made for file at line, to the Read's copies budget, and
// reports whether it fit; when it does not, the Read is over budget.
func (r *reader) chargeCopy(v any, file string, line int) bool {
	b := r.bytes
	if b == nil {
		return true
	}
	if b.err != nil {
		return false
	}
	if !b.spendCopy(v) {
		b.err = &TooLargeError{File: file, Line: line, Limit: b.copiesLimit, Copies: true}
		return false
	}
	return true
}

// newLoader is a loader of file charging the Read's byte budget, reporting to report.
func (r *reader) newLoader(file string, report func(line int, reason string)) *loader {
	l := newLoader(report)
	l.bytes, l.file = r.bytes, file
	return l
}

// problem records an Unsupported entry once.
func (r *reader) problem(file string, line int, reason string) {
	r.problemAt(file, line, 0, reason)
}

// problemAt records an Unsupported entry at a line and column (0: unknown) once. Only a
// single document (ReadDocument) keeps the column: a tree's report stays by file and line.
func (r *reader) problemAt(file string, line, col int, reason string) {
	if !r.columns {
		col = 0
	}
	u := Unsupported{File: file, Line: max(line, 1), Column: col, Reason: reason}
	if !r.seen[u] {
		r.seen[u] = true
		r.problems = append(r.problems, u)
	}
}

// match is fnmatch with the compiled pattern kept for the rest of the Read.
func (r *reader) match(name, pat string) bool {
	m, ok := r.globs[pat]
	if !ok {
		m = fnmatchRegexp(pat).MatchString
		r.globs[pat] = m
	}
	return m(name)
}

// filter is Python's fnmatch.filter over the available SLS names.
func (r *reader) filter(pat string) []string {
	var out []string
	for _, name := range r.avail {
		if r.match(name, pat) {
			out = append(out, name)
		}
	}
	return out
}

// expand is render_pillar's expansion of a top.sls entry: the available SLS names it
// matches as a glob, or the entry itself when none does.
func (r *reader) expand(entry string) []string {
	if m := r.filter(entry); len(m) > 0 {
		return m
	}
	return []string{entry}
}

// listSLS is Salt's list_states for a roots file server: every file under dir ending in
// ".sls", "a/b.sls" as "a.b" and "a/init.sls" as "a", sorted. Like the roots backend it
// follows symbolic links, so a linked directory's files are listed under the link's name
// too; a link back to a directory being walked is not followed again, which ends loops.
func listSLS(dir string) ([]string, error) {
	set := map[string]bool{}
	walking := map[string]bool{}
	var walk func(abs, rel string) error
	walk = func(abs, rel string) error {
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return fmt.Errorf("list the pillar tree: %w", err)
		}
		if walking[real] {
			return nil
		}
		walking[real] = true
		defer delete(walking, real)
		entries, err := os.ReadDir(abs)
		if err != nil {
			return fmt.Errorf("list the pillar tree: %w", err)
		}
		for _, e := range entries {
			p := filepath.Join(abs, e.Name())
			r := e.Name()
			if rel != "" {
				r = rel + "/" + e.Name()
			}
			info, err := os.Stat(p) // follows links
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue // a dangling link
				}
				return fmt.Errorf("list the pillar tree: %w", err)
			}
			switch {
			case info.IsDir():
				if err := walk(p, r); err != nil {
					return err
				}
			case info.Mode().IsRegular() && strings.HasSuffix(r, ".sls"):
				if strings.HasSuffix(r, "/init.sls") {
					set[strings.ReplaceAll(r, "/", ".")[:len(r)-len("/init.sls")]] = true
				} else {
					set[strings.ReplaceAll(r, "/", ".")[:len(r)-len(".sls")]] = true
				}
			}
		}
		return nil
	}
	if err := walk(dir, ""); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
