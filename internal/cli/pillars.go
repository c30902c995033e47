package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/server"
)

func init() {
	extraCommands = append(extraCommands, newPillarCmd)
}

// newPillarCmd is `strata pillar`: rows of a target (--global, --org [--group], --node), a
// node's merged pillar and its explanation, and a category's history.
func newPillarCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pillar", Short: "Manage pillars (layered configuration for Salt)"}
	var t client.PillarTarget
	target := func(c *cobra.Command) {
		c.Flags().BoolVar(&t.Global, "global", false, "the global target")
		c.Flags().StringVar(&t.Org, "org", "", "an org (with --group: a group of it)")
		c.Flags().StringVar(&t.Group, "group", "", "a group of --org")
		c.Flags().StringVar(&t.Node, "node", "", "a node")
		c.PreRunE = func(*cobra.Command, []string) error {
			n := 0
			for _, set := range []bool{t.Global, t.Org != "", t.Node != ""} {
				if set {
					n++
				}
			}
			switch {
			case t.Group != "" && t.Org == "":
				return errors.New("--group names a group of an org: give --org ORG too")
			case n != 1:
				return errors.New("give exactly one pillar target: --global, --org ORG, --org ORG --group GROUP, or --node NODE")
			}
			return nil
		}
	}
	var file, ifMatch string
	set := &cobra.Command{
		Use:   "set CATEGORY -f FILE",
		Short: "Store a YAML or JSON file as a target's category (- for stdin)",
		Long: "Stores FILE (- for stdin) as the category: YAML read as Salt reads an SLS file (YAML 1.1),\n" +
			"or JSON (a .json file, or stdin holding a JSON object). The answer of `strata pillar get\n" +
			"-o json|yaml` is taken as its data, after checking it is for the same target and category.",
		Example: "  strata pillar get apache --node web01 -o yaml > apache.yaml   # edit it, then\n" +
			"  strata pillar set apache --node web01 -f apache.yaml\n" +
			"  strata pillar set ntp --global -f /srv/pillar/ntp.sls",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return storePillarFile(cmd, g, t, args[0], file, ifMatch)
		},
	}
	target(set)
	set.Flags().StringVarP(&file, "filename", "f", "", "YAML or JSON file holding the category's data (- for stdin)")
	set.Flags().StringVar(&ifMatch, "if-match", "", "store only if the row is still at this ETag")
	_ = set.MarkFlagRequired("filename")

	get := &cobra.Command{
		Use:   "get CATEGORY",
		Short: "Show a target's category",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.PillarGet(cmd.Context(), t, args[0])
			if err != nil {
				return err
			}
			return g.print(p, func(w io.Writer) error {
				tb := newTable(w, "TARGET", "CATEGORY", "REVISION", "UPDATED BY", "UPDATED AT")
				tb.row(p.Target, p.Category, fmt.Sprint(p.Revision), p.UpdatedBy, p.UpdatedAt.Format("2006-01-02T15:04:05Z"))
				if err := tb.flush(); err != nil {
					return err
				}
				fmt.Fprintln(w)
				return leafTable(w, p.Data, nil)
			})
		},
	}
	target(get)

	del := &cobra.Command{
		Use:   "delete CATEGORY",
		Short: "Delete a target's category",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return c.PillarDelete(cmd.Context(), t, args[0], ifMatch)
		},
	}
	target(del)
	del.Flags().StringVar(&ifMatch, "if-match", "", "delete only if the row is still at this ETag")

	list := &cobra.Command{
		Use:   "list",
		Short: "List a target's categories",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.PillarList(cmd.Context(), t)
			if err != nil {
				return err
			}
			return g.printList(ps, func(w io.Writer) error {
				tb := newTable(w, "CATEGORY", "REVISION", "UPDATED BY", "UPDATED AT")
				for _, p := range ps {
					tb.row(p.Category, fmt.Sprint(p.Revision), p.UpdatedBy, p.UpdatedAt.Format("2006-01-02T15:04:05Z"))
				}
				return tb.flush()
			})
		},
	}
	target(list)

	render := func(use, short string, explain bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " NODE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				body, err := c.PillarRender(cmd.Context(), args[0], explain)
				if err != nil {
					return err
				}
				// Numbers stay as the server spelled them (a big integer is not a float64).
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.UseNumber()
				var v any
				if err := dec.Decode(&v); err != nil {
					return err
				}
				return g.print(v, func(w io.Writer) error {
					if !explain {
						return leafTable(w, body, nil)
					}
					var ex struct {
						Pillar  json.RawMessage `json:"pillar"`
						Explain []struct {
							// Path is a leaf's whole pointer; past the server's path
							// budget, the previous path's first Shared bytes and Rest.
							Path       *string                             `json:"path"`
							Shared     int                                 `json:"shared"`
							Rest       string                              `json:"rest"`
							SetBy      struct{ Target, Category string }   `json:"setBy"`
							Overridden []struct{ Target, Category string } `json:"overridden"`
						} `json:"explain"`
					}
					if err := json.Unmarshal(body, &ex); err != nil {
						return err
					}
					from := map[string][2]string{}
					prev := ""
					for _, e := range ex.Explain {
						path := ""
						switch {
						case e.Path != nil:
							path = *e.Path
						case e.Shared >= 0 && e.Shared <= len(prev):
							path = prev[:e.Shared] + e.Rest
						default:
							return fmt.Errorf("the explanation of %s does not continue its previous path", args[0])
						}
						prev = path
						var over []string
						for _, o := range e.Overridden {
							over = append(over, o.Target+" "+o.Category)
						}
						from[path] = [2]string{e.SetBy.Target + " " + e.SetBy.Category, strings.Join(over, ", ")}
					}
					return leafTable(w, ex.Pillar, from)
				})
			},
		}
	}

	var before int64
	history := &cobra.Command{
		Use:   "history CATEGORY",
		Short: "Show a category's changes, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			hs, err := c.PillarHistory(cmd.Context(), t, args[0], before, 100)
			if err != nil {
				return err
			}
			return g.printList(hs, func(w io.Writer) error {
				// An entry a sync import added shows who imported it and when: its ACTOR and
				// AT are what the imported stream claimed. The column appears only when the
				// page holds such an entry.
				imported := slices.ContainsFunc(hs, func(h client.PillarChange) bool { return h.ImportedBy != "" })
				headers := []string{"ID", "REVISION", "ACTOR", "AT", "CHANGE"}
				if imported {
					headers = append(headers, "IMPORTED BY")
				}
				tb := newTable(w, headers...)
				for _, h := range hs {
					what := "updated"
					switch {
					case len(h.Old) == 0 || string(h.Old) == "null":
						what = "created"
					case len(h.New) == 0 || string(h.New) == "null":
						what = "deleted"
					}
					row := []string{fmt.Sprint(h.ID), fmt.Sprint(h.Revision), h.Actor, h.At.UTC().Format("2006-01-02T15:04:05Z"), what}
					if imported {
						by := "-"
						if h.ImportedBy != "" {
							by = h.ImportedBy
							if h.ImportedAt != nil {
								by += " at " + h.ImportedAt.UTC().Format("2006-01-02T15:04:05Z")
							}
						}
						row = append(row, by)
					}
					tb.row(row...)
				}
				return tb.flush()
			})
		},
	}
	target(history)
	history.Flags().Int64Var(&before, "before", 0, "continue below this history entry id")

	var importOpts client.PillarImportOptions
	var env, nodegroupsFile, gpgHomedir string
	var quiet, followSymlinks bool
	var importFormat string
	imp := &cobra.Command{
		Use:   "import DIR|FILE",
		Short: "Import a Salt file-based pillar tree (top.sls and SLS files) in one transaction",
		Long: "Reads DIR's top.sls and the SLS files it names (YAML 1.1, as Salt reads them), and imports\n" +
			"them: '*' becomes global rows, a minion id a node's rows, a list, glob or nodegroup a group\n" +
			"of --org with static members or a selector. Anything that cannot be translated faithfully\n" +
			"(Jinja, grain or compound matchers, GPG-encrypted values) is listed by file and line, and\n" +
			"nothing is imported unless --skip-unsupported is given. A symbolic link inside DIR is refused\n" +
			"(it could upload a file from outside the tree) unless --follow-symlinks is given.\n\n" +
			"With --gpg-homedir, PGP-encrypted values are decrypted here with gpg and that GnuPG home's\n" +
			"keys, as Salt's gpg renderer would, and sent to the server as plaintext (use TLS), which\n" +
			"stores their rows as secrets; the server never needs the private key.",
		Example: "  strata pillar import /srv/pillar --org acme --dry-run\n" +
			"  strata pillar import /srv/pillar --org acme --gpg-homedir /etc/salt/gpgkeys",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch strings.ToLower(importFormat) {
			case "ndjson":
				if gpgHomedir != "" {
					return errors.New("--gpg-homedir decrypts the PGP messages of a Salt tree (--format sls); a sync stream carries no PGP messages")
				}
				return syncImport(cmd, g, args[0], importOpts.DryRun)
			case "", "sls":
			default:
				return fmt.Errorf("--format %q: sls (a Salt tree in DIR) or ndjson (a sync stream in FILE, - for stdin)", importFormat)
			}
			req := client.PillarImportRequest{Files: map[string]string{}, Env: env}
			files, err := slsFiles(args[0], followSymlinks)
			if err != nil {
				return err
			}
			tree, err := openTree(args[0], followSymlinks)
			if err != nil {
				return err
			}
			defer tree.close()
			prog := g.newProgress(int64(len(files)), "files read", quiet)
			for i, f := range files {
				b, err := tree.read(f.rel)
				if err != nil {
					prog.abandon() // no final count before the error
					return err
				}
				req.Files[f.rel] = string(b)
				prog.set(int64(i+1), int64(i+1))
			}
			prog.finish()
			if gpgHomedir != "" {
				if req.Decrypted, err = decryptPGP(cmd.Context(), gpgHomedir, req.Files); err != nil {
					return err
				}
				if n := len(req.Decrypted); n > 0 && !quiet {
					fmt.Fprintf(cmd.ErrOrStderr(), "decrypted %d PGP messages with the keys of %s\n", n, gpgHomedir)
				}
				if len(req.Decrypted) > 0 && cleartextRemote(g.server) {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: the decrypted values go to %s over plain HTTP, readable on the network: use an https:// server\n", server.Redact(g.server))
				}
			}
			var nodegroups []byte
			if nodegroupsFile == "" && strings.HasPrefix(req.Files["top.sls"], exportHeader) {
				// A tree strata exported: its nodegroups are beside it, read as the tree is.
				ok, err := tree.exists("nodegroups.json")
				if err != nil {
					return err
				}
				if ok {
					nodegroupsFile = filepath.Join(args[0], "nodegroups.json")
					fmt.Fprintf(cmd.ErrOrStderr(), "reading the nodegroups of the export from %s\n", nodegroupsFile)
					if nodegroups, err = tree.read("nodegroups.json"); err != nil {
						return err
					}
				}
			} else if nodegroupsFile != "" {
				// Named by the operator: read as named.
				if nodegroups, err = os.ReadFile(nodegroupsFile); err != nil {
					return err
				}
			}
			if nodegroups != nil {
				if err := json.Unmarshal(nodegroups, &req.Nodegroups); err != nil {
					return fmt.Errorf("--nodegroups %s: a JSON object of nodegroup name to minion ids: %v", nodegroupsFile, err)
				}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := importWithProgress(cmd.Context(), g, c, req, importOpts, quiet)
			if err != nil {
				return err
			}
			return g.print(rep, func(w io.Writer) error {
				tb := newTable(w, "TARGET", "CATEGORY", "ACTION", "FROM")
				for _, r := range rep.Rows {
					category := r.Category
					if r.Secret {
						category += " (secret)" // holds decrypted PGP values, stored as a secret
					}
					tb.row(r.Target, category, r.Action, strings.Join(r.Sources, ","))
				}
				if err := tb.flush(); err != nil {
					return err
				}
				for _, gr := range rep.Groups {
					note := ""
					if gr.Snapshot {
						note = " (a snapshot of the nodes the glob matches now: nodes created later do not join it)"
					}
					fmt.Fprintf(w, "group %s (from %q): members %v created %v%s\n", gr.Name, gr.Match, gr.Members, gr.Created, note)
				}
				if len(rep.CreatedNodes) > 0 {
					fmt.Fprintf(w, "nodes created in org %s: %s\n", rep.Org, strings.Join(rep.CreatedNodes, ", "))
				}
				for _, u := range rep.Unsupported {
					fmt.Fprintf(w, "skipped %s:%d: %s\n", u.File, u.Line, u.Reason)
				}
				state := "imported"
				if rep.DryRun {
					state = "dry run: nothing was changed"
				}
				_, err := fmt.Fprintln(w, state)
				return err
			})
		},
	}
	imp.Flags().StringVar(&importOpts.Org, "org", "", "the org receiving the tree's nodes and groups")
	imp.Flags().StringVar(&importFormat, "format", "sls", "sls: a Salt pillar tree in DIR; ndjson: a sync stream (strata pillar export --format ndjson) in FILE, - for stdin")
	imp.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress (a bar on a terminal, a line of counts every 5 s otherwise)")
	imp.Flags().BoolVar(&importOpts.DryRun, "dry-run", false, "check and print the plan, change nothing")
	imp.Flags().BoolVar(&importOpts.SkipUnsupported, "skip-unsupported", false, "import what can be translated, skip the rest")
	imp.Flags().StringVar(&env, "env", "", "the top.sls environment to import (default base)")
	imp.Flags().StringVar(&gpgHomedir, "gpg-homedir", "", "decrypt the tree's PGP-encrypted values with gpg and this GnuPG home's keys (e.g. Salt's /etc/salt/gpgkeys) and import them as secrets")
	imp.Flags().BoolVar(&followSymlinks, "follow-symlinks", false, "follow symbolic links in DIR (refused by default: a link could upload a file from outside the tree)")
	imp.Flags().StringVar(&nodegroupsFile, "nodegroups", "", "JSON file of the master's nodegroups (name to minion ids); for a tree strata exported, its nodegroups.json")

	var exportOrg, exportFormat string
	var force bool
	exp := &cobra.Command{
		Use:   "export DIR|FILE",
		Short: "Write the pillar rows as a Salt pillar tree (top.sls, SLS files, nodegroups)",
		Long: "Writes strata's pillar rows into DIR as a Salt pillar tree: top.sls, one SLS file per row\n" +
			"under strata/, and the nodegroups top.sls names (nodegroups.conf for the master's\n" +
			"configuration, nodegroups.json for the importer). Salt renders each minion's pillar from it\n" +
			"as strata does; `strata pillar import DIR` reads it back to the same rows. Selector groups\n" +
			"become nodegroups of the nodes they select now. DIR must be empty or not exist (--force:\n" +
			"replace the files the export writes); the export never writes through a symbolic link,\n" +
			"and a DIR, or a directory in it, that is a link is refused.\n\n" +
			"--format ndjson writes a sync stream instead (FILE, - for stdout): the kinds of typed\n" +
			"categories, category bindings, orgs, nodes with labels, groups, and every row with its\n" +
			"history, for `strata pillar import --format ndjson FILE` on another strata.",
		Example: "  strata pillar export ./pillar-tree\n  strata pillar export ./acme --org acme\n  strata pillar export --format ndjson pillars.ndjson",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			switch strings.ToLower(exportFormat) {
			case "ndjson":
				return syncExport(cmd, g, dir, exportOrg, force)
			case "", "sls":
			default:
				return fmt.Errorf("--format %q: sls (a Salt tree in DIR) or ndjson (a sync stream in FILE, - for stdout)", exportFormat)
			}
			// DIR is made (or checked) before anything is fetched, and every file is then
			// created exclusively and never through a link (files.go).
			out, err := openExportDir(dir, force)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				out.abandon()
				return err
			}
			tree, err := c.PillarExport(cmd.Context(), exportOrg)
			if err != nil {
				out.abandon()
				return err
			}
			paths := slices.Sorted(maps.Keys(tree.Files))
			prog := g.newProgress(int64(len(paths)), "files written", quiet)
			for i, rel := range paths {
				// Owner-only: a tree holds the plaintext of secret categories the token may read.
				if err := out.write(rel, []byte(tree.Files[rel])); err != nil {
					prog.abandon()
					out.close()
					return err
				}
				prog.set(int64(i+1), int64(i+1))
			}
			prog.finish()
			if err := out.close(); err != nil {
				return err
			}
			summary := map[string]any{"dir": dir, "rows": tree.Rows, "files": len(paths), "nodegroups": len(tree.Nodegroups)}
			return g.print(summary, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "exported %d rows into %s (%d files, %d nodegroups: add %s to the Salt master's configuration)\n",
					tree.Rows, dir, len(paths), len(tree.Nodegroups), filepath.Join(dir, "nodegroups.conf"))
				return err
			})
		},
	}
	exp.Flags().StringVar(&exportOrg, "org", "", "export one org's rows (and the global rows)")
	exp.Flags().StringVar(&exportFormat, "format", "sls", "sls: a Salt pillar tree in DIR; ndjson: a sync stream for another strata in the file DIR names (- for stdout)")
	exp.Flags().BoolVar(&force, "force", false, "write into a directory that is not empty (or over an existing FILE), replacing the files the export writes")
	exp.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress")

	edit, restore := newPillarEditCmd(g, &t), newPillarRestoreCmd(g, &t)
	target(edit)
	target(restore)
	cmd.AddCommand(set, get, del, list, imp, exp, edit, restore, newPillarSettingsCmd(g), newPillarCategoryCmd(g),
		render("render", "Show a node's merged pillar", false),
		render("explain", "Show a node's merged pillar and where each value came from", true),
		history)
	return cmd
}

// newPillarSettingsCmd is `strata pillar settings get|set`: the installation's pillar
// settings, which every replica and the SQL function share.
func newPillarSettingsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "settings", Short: "Show or change the pillar settings (list merging, unknown minions)"}
	show := func(s client.PillarSettings) error {
		return g.print(s, func(w io.Writer) error {
			tw := newTable(w, "SETTING", "VALUE", "MEANING")
			if s.MergeLists != nil {
				tw.row("merge-lists", fmt.Sprint(*s.MergeLists), "lists of lower layers are kept before higher ones (Salt's pillar_merge_lists)")
			}
			if s.UnknownMinion != nil {
				tw.row("unknown-minion", *s.UnknownMinion, "what a minion strata does not know gets: empty (an empty pillar) or error (_errors, states refused)")
			}
			return tw.flush()
		})
	}
	get := &cobra.Command{
		Use:   "get",
		Short: "Show the pillar settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.PillarSettingsGet(cmd.Context())
			if err != nil {
				return err
			}
			return show(s)
		},
	}
	var (
		mergeLists    bool
		unknownMinion string
	)
	set := &cobra.Command{
		Use:   "set",
		Short: "Change pillar settings (only the flags given)",
		Long: "Change the pillar settings named by the flags given; the others are left as they are.\n\n" +
			"  --merge-lists=true     lists of lower layers are kept before higher ones (Salt's pillar_merge_lists)\n" +
			"  --unknown-minion=error a minion strata does not know gets _errors (states refused) instead of an empty pillar",
		Example: "  strata pillar settings set --unknown-minion error\n  strata pillar settings set --merge-lists=true",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s client.PillarSettings
			if cmd.Flags().Changed("merge-lists") {
				s.MergeLists = &mergeLists
			}
			if cmd.Flags().Changed("unknown-minion") {
				if unknownMinion != "empty" && unknownMinion != "error" {
					return fmt.Errorf("--unknown-minion %q: must be empty or error", unknownMinion)
				}
				s.UnknownMinion = &unknownMinion
			}
			if s.MergeLists == nil && s.UnknownMinion == nil {
				return fmt.Errorf("nothing to set: give --merge-lists and/or --unknown-minion")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.PillarSettingsSet(cmd.Context(), s)
			if err != nil {
				return err
			}
			return show(out)
		},
	}
	set.Flags().BoolVar(&mergeLists, "merge-lists", false, "keep lists of lower layers before higher ones instead of replacing them (Salt's pillar_merge_lists)")
	set.Flags().StringVar(&unknownMinion, "unknown-minion", "", "what a minion strata does not know gets: empty or error")
	cmd.AddCommand(get, set)
	return cmd
}

// syncExport writes the ndjson sync stream to path (- for stdout).
func syncExport(cmd *cobra.Command, g *globals, path, org string, force bool) error {
	// The file is created (exclusively, owner-only, never through a link) before the stream
	// is fetched, so an existing FILE fails at once and nothing can appear there meanwhile.
	var f *os.File
	if path != "-" {
		var err error
		if f, err = createExclusive(path, force); err != nil {
			return err
		}
	}
	fail := func(err error) error {
		if f != nil {
			f.Close()
			_ = os.Remove(path)
		}
		return err
	}
	c, err := g.client()
	if err != nil {
		return fail(err)
	}
	b, err := c.PillarSyncExport(cmd.Context(), org)
	if err != nil {
		return fail(err)
	}
	if path == "-" {
		_, err := cmd.OutOrStdout().Write(b)
		return err
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return g.print(map[string]any{"file": path, "records": bytes.Count(b, []byte("\n"))}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "wrote %d records to %s\n", bytes.Count(b, []byte("\n")), path)
		return err
	})
}

// syncImport sends an ndjson sync stream from path (- for stdin) and prints the plan.
func syncImport(cmd *cobra.Command, g *globals, path string, dryRun bool) error {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	rep, err := c.PillarSyncImport(cmd.Context(), b, dryRun)
	if err != nil {
		return err
	}
	return g.print(rep, func(w io.Writer) error {
		tb := newTable(w, "TYPE", "NAME", "ACTION", "HISTORY ADDED")
		counts := map[string]int{}
		for _, it := range rep.Items {
			tb.row(it.Type, it.Name, it.Action, fmt.Sprint(it.History))
			counts[it.Action]++
		}
		if err := tb.flush(); err != nil {
			return err
		}
		state := "synced"
		if rep.DryRun {
			state = "dry run: nothing was changed"
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		_, err := fmt.Fprintf(w, "%s (%s)\n", state, strings.Join(parts, ", "))
		return err
	})
}

// exportHeader starts the top.sls of a tree `strata pillar export` wrote (pillar.ExportHeader;
// the CLI does not import server packages).
const exportHeader = "# Written by strata pillar export"

// newPillarCategoryCmd is `strata pillar category list|get|set|delete`: the properties of a
// category, which apply at every target (a kind binding makes it a typed category).
func newPillarCategoryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "category", Short: "Show or change the properties of pillar categories (typed categories)"}
	show := func(cs []client.PillarCategory, one bool) error {
		var v any = map[string]any{"items": cs}
		if one {
			v = cs[0]
		}
		return g.print(v, func(w io.Writer) error {
			tw := newTable(w, "CATEGORY", "KIND", "SECRET", "ROWS", "UPDATED BY")
			for _, c := range cs {
				k := c.Kind
				if k == "" {
					k = "-"
				}
				sec := "-"
				if c.Secret {
					sec = "yes"
				}
				tw.row(c.Category, k, sec, fmt.Sprint(c.Rows), c.UpdatedBy)
			}
			return tw.flush()
		})
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the categories that have properties or rows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			cs, err := c.PillarCategories(cmd.Context())
			if err != nil {
				return err
			}
			return show(cs, false)
		},
	}
	get := &cobra.Command{
		Use:   "get CATEGORY",
		Short: "Show a category's properties",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.PillarCategoryGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return show([]client.PillarCategory{out}, true)
		},
	}
	var (
		kindName string
		isSecret bool
	)
	set := &cobra.Command{
		Use:   "set CATEGORY [--kind KIND] [--secret[=false]]",
		Short: "Set a category's properties: --kind binds it to a kind (a typed category), --secret encrypts it",
		Long: "Set a category's properties, which apply at every target. --kind binds the category to a\n" +
			"registered kind: every row of the category, at any target, is then validated by the kind's\n" +
			"schema (with ratcheting), and registering a new revision of the kind checks the stored rows.\n" +
			"Binding refuses (and lists the rows) when stored rows do not validate. --kind \"\" unbinds\n" +
			"the category; its rows stay.\n\n" +
			"--secret stores every row of the category encrypted (existing rows and their history are\n" +
			"converted now) and masks its values as \"(secret)\" for every reader without\n" +
			"pillars:read-secrets on the row's target; --secret=false stores them in plaintext again (it\n" +
			"needs pillars:read-secrets:*). A property whose flag is not given keeps its value.",
		Example: "  strata pillar category set ntp --kind NtpFormula\n  strata pillar category set creds --secret",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			// PUT replaces every property: start from the current ones, so a flag not given
			// keeps its property (--secret alone does not unbind a typed category).
			var req client.PillarCategoryRequest
			cur, err := c.PillarCategoryGet(cmd.Context(), args[0])
			if err == nil {
				req = client.PillarCategoryRequest{Kind: cur.Kind, Secret: cur.Secret}
			} else if !client.IsNotFound(err) {
				return err
			}
			if cmd.Flags().Changed("kind") {
				req.Kind = kindName
			}
			if cmd.Flags().Changed("secret") {
				req.Secret = isSecret
			}
			// A change of secret re-stores every row and history entry in the request's one
			// transaction (the server logs its progress): a spinner meanwhile on a terminal;
			// the count follows the answer.
			var prog *progress
			if req.Secret != cur.Secret && cur.Rows > 0 {
				prog = g.newSpinner(fmt.Sprintf("converting %d rows and their history", cur.Rows), !isTerminal(g.stderr))
			}
			ifMatch := cur.ETag // what the properties were when read: 412 if changed meanwhile
			if client.IsNotFound(err) {
				ifMatch = `"none"`
			}
			out, err := c.PillarCategorySetIf(cmd.Context(), args[0], req, ifMatch)
			if prog != nil {
				prog.end(err)
			}
			if err != nil {
				return err
			}
			if out.Represented > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d rows rewritten with the kind's defaults\n", out.Represented)
			}
			if out.Converted > 0 {
				state := "encrypted"
				if !out.Secret {
					state = "decrypted"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d rows and history entries %s\n", out.Converted, state)
			}
			return show([]client.PillarCategory{out}, true)
		},
	}
	set.Flags().StringVar(&kindName, "kind", "", "the kind whose schema the category's rows must follow (\"\": unbind)")
	set.Flags().BoolVar(&isSecret, "secret", false, "store the category's rows encrypted and mask them for readers without pillars:read-secrets")
	del := &cobra.Command{
		Use:   "delete CATEGORY",
		Short: "Remove a category's properties (its rows stay, untyped)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.PillarCategoryDelete(cmd.Context(), args[0]); err != nil {
				return err
			}
			return g.print(map[string]any{"category": args[0], "deleted": true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "category %s: properties removed\n", args[0])
				return err
			})
		},
	}
	cmd.AddCommand(list, get, set, del)
	return cmd
}

// leafTable prints a pillar (a JSON object) as a table of its leaves: PATH in Salt's
// colon form (apache:port, what pillar.get takes) and the VALUE as JSON; with from (JSON
// pointer → set by, overrode) also where each leaf came from.
func leafTable(w io.Writer, data json.RawMessage, from map[string][2]string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if len(data) > 0 {
		if err := dec.Decode(&v); err != nil {
			return err
		}
	}
	headers := []string{"PATH", "VALUE"}
	if from != nil {
		headers = append(headers, "SET BY", "OVERRODE")
	}
	tb := newTable(w, headers...)
	var walk func(v any, colon, pointer string)
	walk = func(v any, colon, pointer string) {
		if m, ok := v.(map[string]any); ok && (len(m) > 0 || colon == "") {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				c := k
				if colon != "" {
					c = colon + ":" + k
				}
				walk(m[k], c, pointer+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
			}
			return
		}
		b, _ := json.Marshal(v)
		row := []string{colon, string(b)}
		if from != nil {
			f := from[pointer]
			row = append(row, f[0], f[1])
		}
		tb.row(row...)
	}
	walk(v, "", "")
	return tb.flush()
}
