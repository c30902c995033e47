package sls

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/pillar/merge"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/tree.golden.json")

// treeOptions are the master settings the testdata tree is read with.
func treeOptions() Options {
	return Options{
		Nodegroups: map[string][]string{"webservers": {"web2", "web1"}},
		KnownNodes: []string{"web1", "web2", "web10", "db1", "db2", "app1", "mail1"},
	}
}

// TestReadTreeGolden reads testdata/tree, which exercises every rule of the package, and
// compares the whole plan with testdata/tree.golden.json (go test -update rewrites it;
// review the diff).
func TestReadTreeGolden(t *testing.T) {
	t.Parallel()
	plan, err := Read("testdata/tree", treeOptions())
	require.NoError(t, err)
	got, err := json.MarshalIndent(plan, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	if *updateGolden {
		require.NoError(t, os.WriteFile("testdata/tree.golden.json", got, 0o644))
	}
	want, err := os.ReadFile("testdata/tree.golden.json")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// TestReadTreeRules spells out the tree's main expectations, so that a reviewer need not
// trust the golden file.
func TestReadTreeRules(t *testing.T) {
	t.Parallel()
	plan, err := Read("testdata/tree", treeOptions())
	require.NoError(t, err)
	require.Equal(t, "base", plan.Env)

	rows := map[string]Row{}
	var order []string
	for _, r := range plan.Rows {
		key := r.Target.Kind + "/" + r.Target.Name + "/" + r.Category
		rows[key] = r
		order = append(order, key)
	}
	// order: -1 puts 'db*' first; the rest keep top.sls order; 'db.*' expands sorted.
	require.Equal(t, []string{
		"group/glob-db-0245360a/db.main", "group/glob-db-0245360a/db.replica",
		"global//common", "global//empty",
		"node/web1/webserver", "node/web1/users.admins",
		"group/webservers/webserver",
		"group/glob-web-491ed836/monitoring",
		"group/compound-app-or-db1-or-l-mail1-mail2-08c4b73c/apps",
	}, order)

	common := rows["global//common"].Data
	require.Equal(t, map[string]any{
		"yes_": true, "no_": false, "on_": true, "off_": false, "upper": true,
		"not_bool": "y", "quoted": "yes",
	}, common["flags"])
	require.Equal(t, map[string]any{
		"octal_looking": json.Number("10"), // Salt strips the zeros: not octal 8
		"signed_octal":  json.Number("-8"),
		"eight":         "08",
		"thousand":      json.Number("1000"),
		"sexagesimal":   json.Number("90"),
		"hex":           json.Number("31"),
		"big":           json.Number("12345678901234567890123"),
		"negative_big":  json.Number("-98765432109876543210"),
		"float":         json.Number("1.5"),
		"float_int":     json.Number("2.0"),
		"not_float":     "1e3",
		"time":          json.Number("90.5"),
	}, common["numbers"])
	require.Nil(t, common["nothing"])
	require.Contains(t, common, "also_nothing")
	require.Equal(t, "2001-12-14", common["date"])
	require.Equal(t, map[string]any{}, rows["global//empty"].Data)

	// webserver/init.sls: .tls (a sibling, since init.sls names its directory) and common
	// merged first, its own data last.
	web := rows["node/web1/webserver"]
	require.Equal(t, []string{"webserver/tls.sls", "common.sls", "webserver/init.sls"}, web.Sources)
	require.Equal(t, map[string]any{
		"port": json.Number("80"), "tls": true, "modules": []any{"ssl", "rewrite"},
	}, web.Data["apache"])
	require.Equal(t, "web server", web.Data["motd"])
	require.Equal(t, common["numbers"], web.Data["numbers"])

	// key: 'accounts:base' nests the included file.
	admins := rows["node/web1/users.admins"]
	require.Equal(t, map[string]any{"base": map[string]any{"users": map[string]any{"root": map[string]any{"uid": json.Number("0")}}}}, admins.Data["accounts"])
	require.Equal(t, []string{"users/base.sls", "users/admins.sls"}, admins.Sources)

	require.Equal(t, Target{Kind: "group", Name: "webservers", Members: []string{"web1", "web2"}, Match: "webservers"}, rows["group/webservers/webserver"].Target)
	require.Equal(t, Target{Kind: "group", Name: "glob-web-491ed836", Members: []string{"web1", "web10", "web2"}, Match: "web*", Snapshot: true}, rows["group/glob-web-491ed836/monitoring"].Target)
	require.Equal(t, []string{"app1", "db1", "mail1", "mail2"}, rows["group/compound-app-or-db1-or-l-mail1-mail2-08c4b73c/apps"].Target.Members)
	require.Equal(t, "{{ not jinja }}", rows["group/glob-web-491ed836/monitoring"].Data["collector"].(map[string]any)["template"], "#!yaml: braces are text")

	at := map[string]string{}
	for _, u := range plan.Unsupported {
		at[u.File+":"+itoa(u.Line)] = u.Reason
	}
	require.Contains(t, at["templated.sls:3"], "Jinja template syntax")
	require.Contains(t, at["database.sls:4"], "PGP-encrypted")
	require.Contains(t, at["pyrender.sls:1"], `renderer pipeline "py"`)
	require.Contains(t, at["badvalues.sls:2"], "infinity")
	require.Contains(t, at["badvalues.sls:3"], "nan")
	require.Contains(t, at["badvalues.sls:5"], `key "80"`)
	require.Contains(t, at["badvalues.sls:7"], `key "on" is the boolean True`)
	require.Contains(t, at["badvalues.sls:9"], `key "dup" appears twice`)
	require.Contains(t, at["top.sls:9"], `"web2,web3" is read by Salt as one glob`)
	require.Contains(t, at["top.sls:17"], `nodegroup "unknown-ng" is not in Options.Nodegroups`)
	require.Contains(t, at["top.sls:25"], "a grain target")
	require.Contains(t, at["top.sls:28"], "compound target")
	require.Contains(t, at["top.sls:40"], `SLS "missing" does not exist`)
	require.Contains(t, at["top.sls:41"], `entry "on" is the boolean True`)
	require.Contains(t, at["top.sls:42"], `environment "dev" is not imported`)
	require.Len(t, plan.Unsupported, 15, "optional (ignore_missing) is not reported")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// writeTree writes files (path → content) under a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

func readTree(t *testing.T, files map[string]string, opts Options) Plan {
	t.Helper()
	plan, err := Read(writeTree(t, files), opts)
	require.NoError(t, err)
	return plan
}

func reasons(p Plan) []string {
	var out []string
	for _, u := range p.Unsupported {
		out = append(out, u.String())
	}
	return out
}

func rowData(t *testing.T, p Plan, category string) map[string]any {
	t.Helper()
	for _, r := range p.Rows {
		if r.Category == category {
			return r.Data
		}
	}
	t.Fatalf("no row %q in %+v (unsupported: %v)", category, p.Rows, reasons(p))
	return nil
}

func TestIncludeRelativeAlsoMatchesTopLevel(t *testing.T) {
	t.Parallel()
	// users/admins.sls is not an init.sls: ".common" is users.common, and, as in Salt,
	// the stripped name "common" matches the top-level common too.
	p := readTree(t, map[string]string{
		"top.sls":          "base:\n  '*':\n    - users.admins\n",
		"common.sls":       "top: 1\nwho: top\n",
		"users/common.sls": "sibling: 1\nwho: sibling\n",
		"users/admins.sls": "include:\n  - .common\nown: 1\n",
	}, Options{})
	require.Empty(t, p.Unsupported)
	require.Equal(t, map[string]any{"top": json.Number("1"), "sibling": json.Number("1"), "who": "sibling", "own": json.Number("1")}, rowData(t, p, "users.admins"))
	require.Equal(t, []string{"common.sls", "users/common.sls", "users/admins.sls"}, p.Rows[0].Sources)
}

func TestIncludeCycleEndsAsInSalt(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls": "base:\n  '*':\n    - a\n",
		"a.sls":   "include: [b]\nx: a\nonly_a: 1\n",
		"b.sls":   "include: [a]\nx: b\nonly_b: 1\n",
	}, Options{})
	require.Empty(t, p.Unsupported)
	require.Equal(t, map[string]any{"x": "a", "only_a": json.Number("1"), "only_b": json.Number("1")}, rowData(t, p, "a"))
	require.Equal(t, []string{"b.sls", "a.sls"}, p.Rows[0].Sources)
}

func TestIncludeOptions(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"top.sls":  "base:\n  '*':\n    - app\n",
		"base.sls": "pkgs: [vim, curl]\nport: 1\n",
		"app.sls":  "include: [base]\npkgs: [curl, git, git]\nport: 2\n",
	}
	p := readTree(t, files, Options{})
	require.Equal(t, map[string]any{"pkgs": []any{"curl", "git", "git"}, "port": json.Number("2")}, rowData(t, p, "app"))
	p = readTree(t, files, Options{MergeLists: true})
	require.Equal(t, map[string]any{"pkgs": []any{"vim", "curl", "git", "git"}, "port": json.Number("2")}, rowData(t, p, "app"))
	p = readTree(t, files, Options{IncludesOverrideSLS: true})
	require.Equal(t, map[string]any{"pkgs": []any{"vim", "curl"}, "port": json.Number("1")}, rowData(t, p, "app"))
}

func TestIncludeProblems(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls":    "base:\n  '*':\n    - a\n    - b\n    - c\n    - d\n  'x':\n    - ignore_missing: True\n    - optional\n",
		"a.sls":      "k: 1\ninclude:\n  - nowhere\n",
		"b.sls":      "include: base\n",
		"c.sls":      "include:\n  - optional\n  - 7\n",
		"d.sls":      "include:\n  - db.*\n  - x: {key: 3}\n",
		"db/one.sls": "one: 1\n",
		"x.sls":      "x: 1\n",
	}, Options{})
	require.Equal(t, []string{
		`a.sls:3: SLS "nowhere" does not exist (neither nowhere.sls nor nowhere/init.sls): Salt reports it in _errors`,
		`b.sls:1: include: must be a list: Salt reports "Include Declaration ... is not formed as a list"`,
		`c.sls:3: an include: item that is the number 7: Salt fails on it`,
		`d.sls:3: include: "x" has a key that is the number 3, not a string: Salt fails on it`,
	}, reasons(p))
	require.Empty(t, p.Rows, "every SLS needs a reported file")
}

func TestIncludeGlob(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls":         "base:\n  '*':\n    - d\n",
		"d.sls":           "include:\n  - db.*\nown: 1\n",
		"db/one.sls":      "n: 1\n",
		"db/two/init.sls": "n: 2\n",
	}, Options{})
	require.Empty(t, p.Unsupported)
	require.Equal(t, map[string]any{"n": json.Number("2"), "own": json.Number("1")}, rowData(t, p, "d"))
	require.Equal(t, []string{"db/one.sls", "db/two/init.sls", "d.sls"}, p.Rows[0].Sources)
}

func TestTopTargets(t *testing.T) {
	t.Parallel()
	top := `base:
  web1:
    - s
  '*':
    - order: 5
    - s
  'web*':
    - s
  'a,b':
    - match: list
    - s
  'a, b':
    - match: list
    - s
  'N@ng':
    - s
  '* or web1':
    - s
  'E@web.*':
    - s
  'web[12]':
    - match: pcre
    - s
  x:
    - match: nosuch
    - s
  y: s
  'bad!id':
    - s
  123:
    - s
`
	files := map[string]string{"top.sls": top, "s.sls": "k: v\n"}
	p := readTree(t, files, Options{Nodegroups: map[string][]string{"ng": {"a"}}})
	var targets []Target
	for _, r := range p.Rows {
		targets = append(targets, r.Target)
	}
	require.Equal(t, []Target{
		{Kind: "node", Name: "web1", Match: "web1"},
		{Kind: "group", Name: "list-a-b-" + shortHash("list", "a,b"), Members: []string{"a", "b"}, Match: "a,b"},
		{Kind: "group", Name: "ng", Members: []string{"a"}, Match: "N@ng"},
		{Kind: "global", Match: "* or web1"}, // order 5 sorts '*' after it: same target, first row kept
	}, targets)
	require.Equal(t, []string{
		`top.sls:7: glob target "web*": expanding it needs the known nodes (Options.KnownNodes); strata's label selectors cannot match names by pattern`,
		`top.sls:12: list target "a, b": " b" never matches a minion (Salt's list matcher compares exact ids, spaces included; strata node names are 1-253 of A-Z a-z 0-9 . _ -)`,
		`top.sls:19: a pcre target (a Python regular expression on minion ids): the importer does not translate regular expressions into groups (compound word "E@web.*")`,
		`top.sls:21: a pcre target (a Python regular expression on minion ids): the importer does not translate regular expressions into groups`,
		`top.sls:24: match: "nosuch": Salt has no such matcher`,
		`top.sls:27: target "y" must have a list of SLS names and options; Salt cannot read this top file`,
		`top.sls:28: target "bad!id" is not a minion id strata can hold (1-253 of A-Z a-z 0-9 . _ -)`,
		`top.sls:30: target "123" is the number 123 in Salt, not a string, so it matches no minion: quote it`,
	}, reasons(p))

	// With known nodes the glob becomes a snapshot group.
	p = readTree(t, files, Options{KnownNodes: []string{"web2", "web1", "db1"}})
	require.Equal(t, Target{Kind: "group", Name: "glob-web-" + shortHash("glob", "web*"), Members: []string{"web1", "web2"}, Match: "web*", Snapshot: true}, p.Rows[1].Target)
}

func TestTopEnvironments(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"top.sls": "include: [other]\nbase:\n  '*': [s]\ndev:\n  '*': [d]\n",
		"s.sls":   "k: base\n",
		"d.sls":   "k: dev\n",
	}
	p := readTree(t, files, Options{})
	require.Equal(t, "base", p.Env)
	require.Equal(t, []string{
		"top.sls:1: include: in a top file (it reads other top files) is not supported by the importer: merge them into top.sls",
		`top.sls:4: environment "dev" is not imported (importing "base"): import its pillar_roots directory with that environment separately`,
	}, reasons(p))
	p = readTree(t, files, Options{Env: "dev"})
	require.Equal(t, "dev", p.Env)
	require.Equal(t, map[string]any{"k": "dev"}, rowData(t, p, "d"))
	p = readTree(t, files, Options{Env: "qa"})
	require.Contains(t, reasons(p), `top.sls:1: top.sls has no "qa" environment: nothing to import`)
	require.Empty(t, p.Rows)
}

func TestTopFileErrors(t *testing.T) {
	t.Parallel()
	_, err := Read(t.TempDir(), Options{})
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	_, err = Read(writeTree(t, map[string]string{"top.sls": "base: [\n"}), Options{})
	require.ErrorContains(t, err, "parse top.sls")
	_, err = Read(writeTree(t, map[string]string{"top.sls": "- base\n"}), Options{})
	require.ErrorContains(t, err, "the top file must map environments to targets")

	// A templated top file is not an error: it is reported, and nothing is imported.
	p := readTree(t, map[string]string{"top.sls": "base:\n  '*':\n{% if x %}\n    - s\n{% endif %}\n", "s.sls": "a: 1\n"}, Options{})
	require.Equal(t, []string{`top.sls:3: Jinja template syntax "{%": Salt renders this file per minion, so it has no single value to import (also on lines 5)`}, reasons(p))
	require.Empty(t, p.Rows)

	p = readTree(t, map[string]string{"top.sls": "", "s.sls": "a: 1\n"}, Options{})
	require.Equal(t, []string{`top.sls:1: top.sls is empty: there is no "base" environment to import`}, reasons(p))
}

func TestDocumentsThatAreNotMappings(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls":     "base:\n  '*': [empty, blank, comment, falsy, zero, list, text]\n",
		"empty.sls":   "",
		"blank.sls":   "  \n\n",
		"comment.sls": "# nothing\n",
		"falsy.sls":   "false\n",
		"zero.sls":    "0\n",
		"list.sls":    "- a\n",
		"text.sls":    "hello\n",
	}, Options{})
	for _, c := range []string{"empty", "blank", "comment", "falsy", "zero"} {
		require.Equal(t, map[string]any{}, rowData(t, p, c), c)
	}
	require.Equal(t, []string{
		`list.sls:1: the file is a list, not a mapping: Salt reports "does not render to a dictionary"`,
		`text.sls:1: the file is the string "hello", not a mapping: Salt reports "does not render to a dictionary"`,
	}, reasons(p))
}

func TestShebangs(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls":    "base:\n  '*': [plain, old, gpg, path, args, json, yamlex]\n",
		"plain.sls":  "#!yaml\nt: '{% raw %}'\n",
		"old.sls":    "#!yaml_jinja\nt: '{{ x }}'\n",
		"gpg.sls":    "#!jinja | yaml | gpg\nt: 1\n",
		"path.sls":   "#!/usr/bin/env salt\nt: 2\n",
		"args.sls":   "#!yaml -o\nt: 3\n",
		"json.sls":   "#!json\n{}\n",
		"yamlex.sls": "#!yamlex\nt: 4\n",
	}, Options{})
	require.Equal(t, map[string]any{"t": "{% raw %}"}, rowData(t, p, "plain"))
	require.Equal(t, map[string]any{"t": json.Number("1")}, rowData(t, p, "gpg"))
	require.Equal(t, map[string]any{"t": json.Number("2")}, rowData(t, p, "path"))
	require.Equal(t, []string{
		`args.sls:1: renderer pipeline "yaml -o": the importer reads only yaml and jinja|yaml files (Salt renders it with another renderer at compile time)`,
		`json.sls:1: renderer pipeline "json": the importer reads only yaml and jinja|yaml files (Salt renders it with another renderer at compile time)`,
		`old.sls:2: Jinja template syntax "{{": Salt renders this file per minion, so it has no single value to import`,
		`yamlex.sls:1: renderer pipeline "yamlex": the importer reads only yaml and jinja|yaml files (Salt renders it with another renderer at compile time)`,
	}, reasons(p))
}

func TestMissingAndIgnoredSLS(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls": "base:\n  a:\n    - gone\n    - maybe\n  b:\n    - ignore_missing: True\n    - maybe\n",
	}, Options{})
	// ignore_missing on b covers "maybe" for every target, as Salt's ignored_pillars does.
	require.Equal(t, []string{`top.sls:3: SLS "gone" does not exist (neither gone.sls nor gone/init.sls): Salt reports it in _errors`}, reasons(p))
	require.Empty(t, p.Rows)
}

func TestSLSNamesAndCategories(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls":         "base:\n  '*': [Apache, apache, my_app.v2, init, 'a*']\n",
		"Apache.sls":      "v: upper\n",
		"apache/init.sls": "v: lower\n",
		"apache.sls":      "v: file wins over init.sls\n",
		"my_app/v2.sls":   "v: 2\n",
		"init.sls":        "v: init\n",
	}, Options{})
	require.Empty(t, p.Unsupported)
	var cats []string
	for _, r := range p.Rows {
		cats = append(cats, r.Category)
	}
	require.Equal(t, []string{"apache-" + shortHash("category", "Apache"), "apache", "my_app.v2", "init"}, cats, "'a*' matches apache again, already placed")
	require.Equal(t, "file wins over init.sls", rowData(t, p, "apache")["v"])

	require.Equal(t, "users.admins", category("users.admins"))
	require.Equal(t, "sls-"+shortHash("category", "..."), category("..."))
	long := strings.Repeat("x", 150)
	require.Len(t, category(long), 100)
	require.Regexp(t, categoryRE, category("Ünïcode Name!"))
}

func TestGroupNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "web", groupName("nodegroup", "web"))
	require.Equal(t, "ng-web-servers-"+shortHash("nodegroup", "Web_Servers"), groupName("nodegroup", "Web_Servers"))
	long := groupName("glob", strings.Repeat("web-", 40)+"*")
	require.LessOrEqual(t, len(long), 63)
	require.Regexp(t, dnsLabelRE, long)
	require.Regexp(t, dnsLabelRE, groupName("list", ",,,"))
}

func TestSaltLayers(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls": `base:
  '*':
    - common
  'web1,web2':
    - match: list
    - web
    - common
  web1:
    - node
    - web
`,
		"common.sls": "c: 1\n",
		"web.sls":    "w: 1\n",
		"node.sls":   "n: 1\n",
	}, Options{})
	require.Empty(t, p.Unsupported)
	layers := func(minion string) []string {
		var out []string
		for _, r := range p.SaltLayers(minion) {
			out = append(out, r.Target.Match+"/"+r.Category)
		}
		return out
	}
	// Salt's top_matches keeps each entry at its first target.
	require.Equal(t, []string{"*/common", "web1,web2/web", "web1/node"}, layers("web1"))
	require.Equal(t, []string{"*/common", "web1,web2/web"}, layers("web2"))
	require.Equal(t, []string{"*/common"}, layers("other"))
}

func TestRowsDoNotShareData(t *testing.T) {
	t.Parallel()
	p := readTree(t, map[string]string{
		"top.sls": "base:\n  a: [s]\n  b: [s]\n",
		"s.sls":   "m: {k: [1]}\n",
	}, Options{})
	require.Len(t, p.Rows, 2)
	p.Rows[0].Data["m"].(map[string]any)["k"].([]any)[0] = "changed"
	require.Equal(t, json.Number("1"), p.Rows[1].Data["m"].(map[string]any)["k"].([]any)[0])
}

func TestSymlinkedDirectoriesAreFollowed(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"top.sls":      "base:\n  '*': ['real.*', 'link.*']\n",
		"real/one.sls": "one: 1\n",
	})
	require.NoError(t, os.Symlink("real", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(".", filepath.Join(dir, "real", "loop")))
	p, err := Read(dir, Options{})
	require.NoError(t, err)
	var cats []string
	for _, r := range p.Rows {
		cats = append(cats, r.Category)
	}
	require.Equal(t, []string{"real.one", "link.one"}, cats, "a linked directory is listed under its link too; the loop is cut")
}

func TestPathsStayInsideTheTree(t *testing.T) {
	t.Parallel()
	outside := writeTree(t, map[string]string{"secret.sls": "s: 1\n"})
	dir := writeTree(t, map[string]string{
		"top.sls": "base:\n  '*': ['../" + filepath.Base(outside) + "/secret']\n",
	})
	p, err := Read(dir, Options{})
	require.NoError(t, err)
	require.Empty(t, p.Rows)
	require.Len(t, p.Unsupported, 1)
	require.Contains(t, p.Unsupported[0].Reason, "does not exist")
}

func TestIncludesMergeWithTheProjectMerge(t *testing.T) {
	t.Parallel()
	// Includes are folded with package merge (Salt's recurse): merge_lists tests membership
	// against the lower list only, so duplicates in the higher list survive; booleans equal
	// only booleans (the one documented difference from Python, where True == 1).
	got := merge.Recurse(map[string]any{"l": []any{json.Number("1")}}, map[string]any{"l": []any{true, "x", "x"}}, true)
	require.Equal(t, map[string]any{"l": []any{json.Number("1"), true, "x", "x"}}, got)
	// {} changes nothing; null replaces.
	got = merge.Recurse(map[string]any{"a": map[string]any{"b": json.Number("1")}, "c": json.Number("1")}, map[string]any{"a": map[string]any{}, "c": nil}, false)
	require.Equal(t, map[string]any{"a": map[string]any{"b": json.Number("1")}, "c": nil}, got)
	require.True(t, truthy(json.Number("0.5")))
	require.False(t, truthy(json.Number("0.0")))
}
