// Package sls reads a Salt file-based pillar tree (one environment's pillar_roots
// directory: top.sls and its SLS files) into a Plan of strata pillar rows, for
// `strata pillar import DIR`. It is pure: it reads files and nothing else, and another
// package applies the Plan. Its rule is Salt's behaviour, read from Salt 3006's source
// (salt/pillar/__init__.py, salt/template.py, salt/utils/yamlloader.py, the matchers) and
// PyYAML's; anything it cannot reproduce exactly is listed in Plan.Unsupported with its
// file and line instead of being guessed, because an import that silently changes a
// pillar is worse than one that refuses (research/pillars.md §1.7, §3.3, §6).
//
// # top.sls
//
// Only the environment in Options.Env ("base" by default) is read; every other
// environment key, and a top-level include: of other top files, is reported. Targets are
// sorted by their order: option (stable, default 0, read as merge_tops reads it), and a
// target's SLS entries keep their order, repeats dropped. The default matcher is compound,
// as in Salt since 2014.7, and a one-word compound target is a glob. Targets map as follows:
//
//   - '*' (glob or compound) is the global layer.
//   - A glob without metacharacters is one minion id: a node row. It must be a valid
//     strata node name.
//   - Any other glob is expanded with Python's fnmatch against Options.KnownNodes into a
//     group of static members marked Snapshot: strata's label selectors match labels, not
//     names by pattern, so a selector cannot stand for it, and a snapshot is the research's
//     "static group, clearly marked". Without KnownNodes the target is reported.
//   - match: list (or L@a,b in a compound) is a group of those static members. Salt
//     compares list entries exactly, spaces included, so an entry that is not a valid minion
//     id (such as " b" in "a, b") is reported rather than trimmed. A bare "a,b" under the
//     default compound matcher is one glob that matches no minion in Salt; it is reported
//     as an invalid id, not read as a list.
//   - match: nodegroup (or N@name) is a group of the members Options.Nodegroups lists for
//     it, named after the nodegroup when that is a valid group name. An unknown nodegroup is
//     reported.
//   - A compound expression of such terms joined only by "or" is a group of their union (a
//     snapshot when a glob was expanded; global when a term is '*'). and, not and
//     parentheses are reported.
//   - pcre, grain, grain_pcre, pillar*, ipcidr, data, range (and the G@ P@ I@ J@ S@ E@ R@
//     compound words) are reported, each with why.
//
// Generated group names are "<matcher>-<slug of the expression>-<8 hex digits of a hash>"
// (e.g. glob-web-3fa9c2d1), at most 63 characters, the same on every run. An SLS entry is
// a name or a glob over the tree's SLS names (Salt's list_states: a/b.sls and a/b/init.sls
// are "a.b", sorted); a missing SLS is reported at its top.sls line unless a target lists
// it with ignore_missing: True, which, as in Salt, then covers that name everywhere.
// Entries that are not strings, which Salt ignores, are reported so that the user learns
// of them.
//
// # SLS files
//
// An SLS "a.b" is a/b.sls, else a/b/init.sls. A file is rendered with the master's
// default jinja|yaml pipeline unless its first line is a shebang; only yaml and
// jinja|yaml (also as yaml_jinja, optionally followed by gpg) are read, any other renderer
// (#!py, #!json, #!yamlex, #!mako|yaml...) is reported at line 1. When Jinja renders a
// file, any "{{", "{%" or "{#" anywhere in it (Jinja sees comments and quoted strings too)
// makes it a template, reported at its first such line; under #!yaml the same text is a
// literal. Each "-----BEGIN PGP MESSAGE-----" is reported at its line (strata would store
// the ciphertext Salt decrypts) unless Options.Decrypted holds the message's plaintext,
// which the CLI gets from gpg (FindPGPBlocks finds the messages as both sides compare
// them). A string value's messages are then replaced by their plaintext as Salt's gpg
// renderer replaces them, newlines ending the string removed, keys left alone, and the
// rows needing the file are marked Secret. Only a literal block scalar (key: |) or a
// one-line message reads as written; a folded or quoted scalar that joins the armor's
// lines is reported. An empty or whitespace-only file, or a document that is
// false (null, false, 0, "", [], {}), is {} as in Salt, and such an SLS is still imported
// as an empty row (an assignment without values); any other non-mapping document is
// reported.
//
// include: is Salt's: items are names, globs, ".relative" names (resolved against the
// including SLS's parent, or the SLS itself for an init.sls; Salt also matches the name
// with its dots stripped, so ".common" includes a top-level common too) or one-key
// mappings {name: {key: "a:b", defaults: {...}}} whose key nests the included data under
// a: {b: ...}; defaults only feed Jinja and are ignored. Included data is merged first and
// the including file's own data last, winning (pillar_includes_override_sls reverses
// that, see Options), with Salt's recurse merge and Options.MergeLists. Salt's render
// cache is reproduced within one SLS, so include cycles end as in Salt, and a plain
// include is, as in Salt, merged twice (rendered, then its cached own data), which changes
// nothing. Each SLS is rendered as for a minion that has only that SLS: Salt shares the
// cache across all of a minion's SLS, which under its merge (without merge_lists) yields
// the same pillar.
//
// # YAML
//
// Files are typed as Salt's SaltYamlSafeLoader types them, not as YAML 1.2 or yaml.v3
// would. yaml.v3 only parses; every plain scalar is resolved again with PyYAML's YAML 1.1
// rules:
//
//   - yes/no/on/off/true/false in PyYAML's three spellings (yes, Yes, YES) are booleans;
//     y, n and yEs are strings.
//   - ~, null, Null, NULL and the empty scalar are null.
//   - Integers may have underscores (1_000 is 1000), 0b and 0x prefixes, and sexagesimal
//     form (1:30 is 90, 1:30:00 is 5400). Salt's loader strips the leading zeros of an
//     unsigned integer, so 010 is 10 in Salt (8 in plain PyYAML), while -010 and +010
//     still take PyYAML's octal branch (-8, 8). 08 and 09 match no YAML 1.1 integer and are
//     strings; 0o17 is a string. Every integer is a json.Number with its exact decimal
//     digits, of any size.
//   - Floats need a '.': 1.5, 1., .5, 1.0e+3 (a signed exponent), 1:30.5 (90.5); 1e3 and
//     1.0e3 are strings. A float is a json.Number spelled as Python's repr spells it (1.0,
//     1e+16), so it stays a float. .inf, .nan and overflowing floats are reported: JSON has
//     neither infinity nor NaN.
//   - Dates and timestamps stay strings: Salt's loader constructs them as plain scalars.
//   - Quoted and block scalars are strings ('yes' stays "yes"); explicit tags !!str,
//     !!int, !!float, !!bool, !!null and !!timestamp are honoured as PyYAML honours them;
//     !!binary, !!set, !!omap, !!pairs and unknown tags are reported.
//   - A key Salt reads as anything but a string (yes: is True, 80: is 80, ~: is None) is
//     reported, since a JSON key can only be a string and a quietly stringified key would
//     no longer be found by pillar['ports'][80].
//   - What Salt's loader refuses is reported: a repeated key (also two merged mappings
//     sharing a key through <<: [*a, *b]), a duplicate anchor, a second document, a plain
//     "=" or "<<" value. Merge keys follow Salt's flatten_mapping. Recursive aliases and
//     documents expanding to more than a million values are reported.
//   - With Options.MaxBytes (the server's request body limit), the tree's values (strings,
//     numbers, keys and a byte per value, every alias counted each time it is expanded) may
//     add up to no more than that many bytes: PyYAML shares an aliased value, JSON copies
//     it, so a few KB of aliases could otherwise become a row of gigabytes. Read stops
//     with a *TooLargeError naming the file and line as soon as the budget is spent.
//     A value nested deeper than strata stores (jsondepth.Max levels, the document being
//     level 1) is reported at its line, with its JSON pointer.
//     Copies are charged too, to CopyFactor times that budget: each row (an SLS listed
//     for n targets is n rows) and each included SLS merged into another, at the top.sls
//     or include: line that makes the copy.
//
// # Reporting and skipping
//
// Read fails only on I/O and on a top.sls that is not YAML or not a mapping. An
// Unsupported entry makes every row that needs its file (the SLS itself or an include)
// absent from Plan.Rows, whole: an import with --skip-unsupported then leaves that
// layer out rather than writing part of it, so a lower layer's value never shows through
// a half-imported file. A target that cannot be mapped contributes no rows, but its SLS
// files are still read so that all their problems are listed at once. Unsupported is
// sorted by file, line and reason, each entry once.
//
// # Rows
//
// One row per (target, SLS), in Salt's merge order; an SLS reached twice through targets
// that map to the same strata target keeps its first row. The category is the SLS name when
// it obeys strata's rule ([a-z0-9][a-z0-9_.-]*, at most 100 characters); otherwise it is
// lower-cased, other characters become '-', and "-" plus 8 hex digits of a hash of the
// original name are appended so that two SLS never share a category. Plan.SaltLayers gives,
// per minion, the rows in the order Salt merges them, so the applier can check that
// strata's merge of the imported rows equals Salt's, node by node.
package sls
