package pillar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
	"github.com/stratahq/strata/internal/pillar/sls"
)

// ExportOptions choose what an export covers.
type ExportOptions struct {
	// Org limits the export to one org's rows, its groups' and its nodes' (global rows are
	// always included: without them Salt would render the org's minions differently).
	Org string
}

// Export is a Salt pillar tree: files by their path relative to the tree's root.
type Export struct {
	Files map[string]string `json:"files"`
	// Rows counts the pillar rows written; Nodegroups are the nodegroups top.sls names,
	// as nodegroups.json holds them.
	Rows       int                 `json:"rows"`
	Nodegroups map[string][]string `json:"nodegroups"`
}

// ExportHeader is the first line of an exported top.sls; `strata pillar import` reads the
// nodegroups.json beside a top.sls that starts with it.
const ExportHeader = "# Written by strata pillar export"

// Export writes strata's pillar rows as a Salt pillar tree that real Salt renders, minion by
// minion, to the pillar strata renders, and that `strata pillar import` reads back to the same
// rows. Everything is read in one snapshot.
//
// Layout: strata/global/<category>.sls, strata/org/<org>/…, strata/group/<org>/<group>/…,
// strata/node/<node>/… (a path segment Salt would misread — a dot, "init" — is slugged and
// suffixed with a hash). Every SLS names its own SLS path, so Salt renders each row once for
// each minion it applies to (Salt renders an SLS name only once per minion). top.sls lists,
// with increasing order: values so Salt merges them as strata does: '*' with the global rows;
// for each org, the nodegroup org/<org> (the org's nodes) with the org's rows, then its
// groups by priority and name as nodegroups group/<org>/<group> of their members — for a
// selector group the nodes it selects at export time, said in a comment; then each node by
// its minion id. Each SLS file is rendered by yaml alone (#!yaml: a "{{" in a value is not
// Jinja) and carries a strata-export comment placing it (sls.Placement). The master needs the
// nodegroups: nodegroups.conf is a master configuration file, nodegroups.json the same for
// the importer.
func (s *Service) Export(ctx context.Context, opts ExportOptions) (Export, error) {
	out := Export{Files: map[string]string{}, Nodegroups: map[string][]string{}}
	var x exported
	err := s.db.ReadTx(ctx, func(tx *db.Tx) error {
		var err error
		x, err = readExported(ctx, tx, opts.Org)
		return err
	})
	if err != nil {
		return out, err
	}
	// A Salt tree carries plaintext (Salt serves it as it is): a secret row is written only
	// for a caller who may read it.
	for i, r := range x.rows {
		if r.sealed == nil {
			continue
		}
		if !MayReadSecrets(ctx, r.target.ScopeName()) {
			return out, fault.New(fault.KindForbidden, "pillar %q of %s is secret, and a Salt tree holds it in plaintext: exporting it needs the scope pillars:read-secrets:%s (or export with --format ndjson, which carries it encrypted)", r.category, r.target, r.target.ScopeName())
		}
		if x.rows[i].data, err = s.open(r.target, r.category, r.data, r.sealed); err != nil {
			return out, err
		}
	}
	orgs, nodes, groups, rows := x.orgs, x.nodes, x.groups, x.rows

	// Rows by target, categories in byte order (the query's order).
	byTarget := map[string][]exportRow{}
	for _, r := range rows {
		byTarget[r.target.String()] = append(byTarget[r.target.String()], r)
	}
	var top, conf strings.Builder
	fmt.Fprintf(&top, "%s: the pillar rows of %s as a Salt pillar tree.\n", ExportHeader, map[bool]string{true: "org " + opts.Org + " (and the global rows)", false: "every org"}[opts.Org != ""])
	top.WriteString("# Salt renders each minion's pillar from it as strata does, given the nodegroups of\n" +
		"# nodegroups.conf in the master's configuration; `strata pillar import` reads it back\n" +
		"# (with nodegroups.json). Each SLS file's strata-export comment says which row it holds.\n" +
		"base:\n")
	conf.WriteString("# The nodegroups of the strata pillar export beside this file, for the Salt master's\n" +
		"# configuration (e.g. /etc/salt/master.d/strata-nodegroups.conf). Members are the nodes at\n" +
		"# export time.\nnodegroups:\n")
	order := 0
	entry := func(key, match, comment string, ms []string, rs []exportRow, placement func(category string) sls.Placement) error {
		if len(rs) == 0 {
			return nil
		}
		order++
		if comment != "" {
			fmt.Fprintf(&top, "  # %s\n", comment)
		}
		fmt.Fprintf(&top, "  %s:\n", yamlString(key))
		if match != "" {
			fmt.Fprintf(&top, "    - match: %s\n", match)
			out.Nodegroups[key] = ms
			if len(ms) == 0 {
				fmt.Fprintf(&conf, "  %s: []\n", yamlString(key))
			} else {
				fmt.Fprintf(&conf, "  %s: %s\n", yamlString(key), yamlString("L@"+strings.Join(ms, ",")))
			}
		}
		fmt.Fprintf(&top, "    - order: %d\n", order)
		for _, r := range rs {
			path := r.target.exportDir() + "/" + segment(r.category) + ".sls"
			fmt.Fprintf(&top, "    - %s\n", yamlString(strings.ReplaceAll(strings.TrimSuffix(path, ".sls"), "/", ".")))
			file, err := exportFile(placement(r.category), r.target, r.data)
			if err != nil {
				return err
			}
			out.Files[path] = file
			out.Rows++
		}
		return nil
	}
	if err := entry("*", "", "", nil, byTarget[Global.String()], func(c string) sls.Placement {
		return sls.Placement{Target: "global", Category: c}
	}); err != nil {
		return out, err
	}
	for _, org := range orgs {
		members := []string{}
		for _, n := range nodes {
			if n.org == org {
				members = append(members, n.name)
			}
		}
		t := Target{Kind: "org", Org: org}
		if err := entry(t.String(), "nodegroup", "", members, byTarget[t.String()], func(c string) sls.Placement {
			return sls.Placement{Target: t.String(), Category: c}
		}); err != nil {
			return out, err
		}
		for _, g := range groups {
			if g.org != org {
				continue
			}
			ms, comment, err := g.members(nodes)
			if err != nil {
				return out, err
			}
			t := Target{Kind: "group", Org: org, Group: g.name}
			if err := entry(t.String(), "nodegroup", comment, ms, byTarget[t.String()], func(c string) sls.Placement {
				return sls.Placement{Target: t.String(), Category: c, Selector: g.selector, Priority: g.priority}
			}); err != nil {
				return out, err
			}
		}
	}
	for _, n := range nodes {
		t := Target{Kind: "node", Node: n.name}
		if err := entry(n.name, "", "", nil, byTarget[t.String()], func(c string) sls.Placement {
			return sls.Placement{Target: t.String(), Category: c, Org: n.org}
		}); err != nil {
			return out, err
		}
	}
	if order == 0 {
		top.WriteString("  {}\n")
	}
	out.Files["top.sls"] = top.String()
	if len(out.Nodegroups) == 0 {
		conf.WriteString("  {}\n")
	}
	out.Files["nodegroups.conf"] = conf.String()
	ng, err := json.MarshalIndent(out.Nodegroups, "", "  ")
	if err != nil {
		return out, err
	}
	out.Files["nodegroups.json"] = string(ng) + "\n"
	return out, nil
}

// exported is what an export covers, read in one snapshot (tx).
type exported struct {
	orgs   []string
	nodes  []exportNode
	groups []exportGroup
	rows   []exportRow
}

// readExported reads the orgs, nodes, groups and pillar rows of org ("" for all) in tx; an
// unknown org is a 404.
func readExported(ctx context.Context, tx *db.Tx, org string) (exported, error) {
	var (
		x   exported
		err error
	)
	if x.orgs, err = scanStrings(tx.Query(ctx, q.Get("ExportOrgs"), org)); err != nil {
		return x, err
	}
	if org != "" && len(x.orgs) == 0 {
		return x, fault.NotFound("org %q not found", fault.Truncate(org, 80))
	}
	if x.nodes, err = exportNodes(tx.Query(ctx, q.Get("ExportNodes"), org)); err != nil {
		return x, err
	}
	if x.groups, err = exportGroups(tx.Query(ctx, q.Get("ExportGroups"), org)); err != nil {
		return x, err
	}
	x.rows, err = exportRows(tx.Query(ctx, q.Get("ExportRows"), org))
	return x, err
}

type exportNode struct {
	name, org string
	labels    map[string]string
}

type exportGroup struct {
	org, name, selector string
	priority            int
	static              []string
}

type exportRow struct {
	target   Target
	category string
	data     []byte // the masked shape when sealed is set
	sealed   []byte
}

// members are the nodes the group holds now: its static members and the nodes of its org its
// selector matches. comment says, for a selector group, that Salt gets a snapshot.
func (g exportGroup) members(nodes []exportNode) ([]string, string, error) {
	set := map[string]bool{}
	for _, m := range g.static {
		set[m] = true
	}
	comment := ""
	if g.selector != "" {
		sel, err := metadata.ParseSelector(g.selector)
		if err != nil {
			return nil, "", fmt.Errorf("group %s/%s: stored selector %q: %w", g.org, g.name, g.selector, err)
		}
		for _, n := range nodes {
			if n.org == g.org && sel.Matches(n.labels) {
				set[n.name] = true
			}
		}
		comment = fmt.Sprintf("group %s/%s selects nodes by label (%s): this nodegroup lists the nodes it selected at export time; nodes labelled later do not join it in Salt", g.org, g.name, g.selector)
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	slices.Sort(out)
	return out, comment, nil
}

func scanStrings(rows db.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func exportNodes(rows db.Rows, err error) ([]exportNode, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []exportNode
	for rows.Next() {
		var (
			n      exportNode
			labels []byte
		)
		if err := rows.Scan(&n.name, &n.org, &labels); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(labels, &n.labels); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func exportGroups(rows db.Rows, err error) ([]exportGroup, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []exportGroup
	for rows.Next() {
		var g exportGroup
		if err := rows.Scan(&g.org, &g.name, &g.priority, &g.selector, &g.static); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func exportRows(rows db.Rows, err error) ([]exportRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []exportRow
	for rows.Next() {
		var (
			r                 exportRow
			kind, org, target string
		)
		if err := rows.Scan(&kind, &org, &target, &r.category, &r.data, &r.sealed); err != nil {
			return nil, err
		}
		switch kind {
		case "Org":
			r.target = Target{Kind: "org", Org: target}
		case "Group":
			r.target = Target{Kind: "group", Org: org, Group: target}
		case "Node":
			r.target = Target{Kind: "node", Node: target}
		default:
			r.target = Global
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// exportDir is the directory of a target's SLS files in an export.
func (t Target) exportDir() string {
	switch t.Kind {
	case "org":
		return "strata/org/" + segment(t.Org)
	case "group":
		return "strata/group/" + segment(t.Org) + "/" + segment(t.Group)
	case "node":
		return "strata/node/" + segment(t.Node)
	}
	return "strata/global"
}

var plainSegment = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// segment is a name as one path segment of an SLS name: kept when Salt reads it back as
// written (no dot, which Salt turns into a directory; not "init", which names its
// directory), otherwise slugged and suffixed with a hash of the name, so two names never
// share a file.
func segment(name string) string {
	if plainSegment.MatchString(name) && name != "init" && len(name) <= 100 {
		return name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 80 {
		base = base[:80]
	}
	sum := sha256.Sum256([]byte(name))
	return base + "-" + hex.EncodeToString(sum[:4])
}

// exportFile is one SLS file: the yaml renderer line, the placement comment, and the row's
// data as JSON that YAML 1.1 (PyYAML, Salt's loader) reads to the same value.
func exportFile(p sls.Placement, t Target, raw []byte) (string, error) {
	v, err := decodeExact(raw)
	if err != nil {
		return "", fmt.Errorf("pillar %s of %s: %w", p.Category, t, err)
	}
	head, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString("#!yaml\n")
	b.WriteString(sls.PlacementPrefix)
	b.Write(head)
	fmt.Fprintf(&b, "\n# Pillar category %s of %s, exported by strata.\n", p.Category, t)
	writeYAMLValue(&b, v, "")
	b.WriteByte('\n')
	return b.String(), nil
}

// writeYAMLValue writes v (decoded with json.Number) in JSON's syntax, which is YAML flow
// style, spelled so that PyYAML's YAML 1.1 reads back the same value: keys sorted, one
// member per line, strings double-quoted with every character PyYAML refuses or folds
// escaped. Numbers come from jsonb, which prints integers and decimals without exponents:
// YAML 1.1 reads those as int and float (a decimal beyond a double's precision is rounded
// by Salt, as any YAML pillar would be). Below maxExportIndent levels members are written on
// one line, unindented: indenting every level on its own line made a value nested n levels
// deep a file of O(n²) bytes (a 60 KB row stored 9,990 levels deep, before the depth limit,
// exported as 190 MiB), while this keeps the file linear in the row.
func writeYAMLValue(b *bytes.Buffer, v any, indent string) {
	writeYAMLAt(b, v, indent, 0)
}

// maxExportIndent is how many levels an exported SLS file indents.
const maxExportIndent = 32

func writeYAMLAt(b *bytes.Buffer, v any, indent string, level int) {
	open, sep, closing := func(c byte) {
		b.WriteByte(c)
		b.WriteByte('\n')
	}, func() { b.WriteString(",\n") }, func(c byte) {
		b.WriteString("\n" + indent)
		b.WriteByte(c)
	}
	inner := indent + "  "
	if level >= maxExportIndent {
		open, sep, closing = func(c byte) { b.WriteByte(c) }, func() { b.WriteString(", ") }, func(c byte) { b.WriteByte(c) }
		inner = ""
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(t.String())
	case string:
		b.WriteString(yamlString(t))
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		open('[')
		for i, e := range t {
			if i > 0 {
				sep()
			}
			b.WriteString(inner)
			writeYAMLAt(b, e, inner, level+1)
		}
		closing(']')
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		open('{')
		for i, k := range keys {
			if i > 0 {
				sep()
			}
			b.WriteString(inner + yamlString(k) + ": ")
			writeYAMLAt(b, t[k], inner, level+1)
		}
		closing('}')
	default:
		b.WriteString(yamlString(fmt.Sprint(t)))
	}
}

// yamlString is s as a YAML double-quoted scalar: ", \ and every character outside
// PyYAML's printable set, tabs and YAML 1.1's line breaks (\x85, \u2028, \u2029) escaped.
func yamlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		case r < 0x20 || (r >= 0x7f && r <= 0xa0) || r == 0x2028 || r == 0x2029 || (r >= 0xd800 && r <= 0xdfff) || r == 0xfffe || r == 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
