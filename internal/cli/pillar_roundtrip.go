package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/client"
)

// envelopeKeys are the members `pillar get -o json|yaml` prints (client.Pillar): a document
// with exactly these top-level keys is such an answer, whose data is the pillar. The API's
// own answer (GET …/pillars/{category}) adds "secret", and is taken as well.
var envelopeKeys = []string{"category", "data", "revision", "target", "updatedAt", "updatedBy"}

// apiEnvelopeKeys are envelopeKeys with the API's "secret", sorted.
var apiEnvelopeKeys = []string{"category", "data", "revision", "secret", "target", "updatedAt", "updatedBy"}

// pillarDocument is what `pillar set -f` sends: the body, its media type, and the name the
// server's problems give it.
type pillarDocument struct {
	body        []byte
	contentType string
	name        string
}

// readPillarFile reads FILE (- for stdin) for `pillar set -f`.
func readPillarFile(cmd *cobra.Command, file string) ([]byte, string, error) {
	if file == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		return b, "stdin", err
	}
	b, err := os.ReadFile(file)
	return b, file, err
}

// isJSONDocument decides how a file is sent: a .json file as JSON, a .yaml, .yml or .sls file
// as YAML, anything else (stdin) as JSON when it is a JSON object and as YAML otherwise. JSON
// is not sent as YAML because YAML 1.1 reads some JSON differently (1e3 is a string there).
func isJSONDocument(name string, b []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml", ".sls":
		return false
	}
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// pillarPayload turns a file into what `pillar set -f` stores: the file itself, or, when its
// top-level keys are exactly those of `pillar get -o json|yaml` (envelopeKeys), its data, after
// checking that the answer was for the same target and category (a row copied on purpose
// to another target is stored with `pillar get -o json | jq .data`).
func pillarPayload(b []byte, name string, t client.PillarTarget, category string) (pillarDocument, error) {
	if isJSONDocument(name, b) {
		doc := pillarDocument{body: b, contentType: "application/json", name: name}
		var top map[string]json.RawMessage
		if json.Unmarshal(b, &top) != nil || !isEnvelope(keysOf(top)) {
			return doc, nil
		}
		var target, cat string
		if json.Unmarshal(top["target"], &target) != nil || json.Unmarshal(top["category"], &cat) != nil {
			return doc, nil
		}
		if err := checkEnvelope(name, target, cat, t, category); err != nil {
			return doc, err
		}
		doc.body = top["data"]
		return doc, nil
	}
	doc := pillarDocument{body: b, contentType: "application/yaml", name: name}
	data, target, cat, ok, err := yamlEnvelope(b)
	if err != nil {
		return doc, fmt.Errorf("%s: %w", name, err)
	}
	if !ok {
		return doc, nil
	}
	if err := checkEnvelope(name, target, cat, t, category); err != nil {
		return doc, err
	}
	doc.body = data
	return doc, nil
}

func keysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func isEnvelope(sortedKeys []string) bool {
	return slices.Equal(sortedKeys, envelopeKeys) || slices.Equal(sortedKeys, apiEnvelopeKeys)
}

// checkEnvelope refuses an answer of `pillar get` for another target or category than the
// command's: storing it would copy a row somewhere it was not read from.
func checkEnvelope(name, target, cat string, t client.PillarTarget, category string) error {
	if target == t.String() && cat == category {
		return nil
	}
	return fmt.Errorf("%s is `strata pillar get` output for %s %s, not for %s %s, which this command stores.\n"+
		"Store it back where it came from with strata pillar set %s %s -f %s; to copy the data to %s %s, "+
		"store its data member alone (jq .data, yq .data)",
		name, target, cat, t.String(), category, cat, flagsOf(target), name, t.String(), category)
}

// flagsOf spells a target as the server names it (node/web01) as the pillar commands' flags.
func flagsOf(target string) string {
	parts := strings.Split(target, "/")
	switch {
	case len(parts) == 2 && parts[0] == "node":
		return targetFlags(client.PillarTarget{Node: parts[1]})
	case len(parts) == 2 && parts[0] == "org":
		return targetFlags(client.PillarTarget{Org: parts[1]})
	case len(parts) == 3 && parts[0] == "group":
		return targetFlags(client.PillarTarget{Org: parts[1], Group: parts[2]})
	}
	return targetFlags(client.PillarTarget{Global: true})
}

// yamlEnvelope recognizes a YAML answer of `pillar get -o yaml` and returns the text of its
// data with every other line blanked and the "data:" prefix replaced by spaces, so that the
// server, reading it as Salt reads YAML, sees exactly the data as written in the file and
// names a problem by the file's own line and column. The envelope's keys and its target and
// category are plain strings that any YAML reader reads alike; the data is left to the server.
func yamlEnvelope(b []byte) (data []byte, target, category string, ok bool, err error) {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) != 1 {
		return nil, "", "", false, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode || (len(root.Content) != 2*len(envelopeKeys) && len(root.Content) != 2*len(apiEnvelopeKeys)) {
		return nil, "", "", false, nil
	}
	var keys []string
	var dataKey, dataVal *yaml.Node
	next := 0 // the line of the key after data (0: data is last)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, "", "", false, nil
		}
		keys = append(keys, k.Value)
		if dataKey != nil && next == 0 {
			next = k.Line
		}
		switch k.Value {
		case "data":
			dataKey, dataVal = k, v
		case "target":
			target = v.Value
		case "category":
			category = v.Value
		}
	}
	slices.Sort(keys)
	if !isEnvelope(keys) {
		return nil, "", "", false, nil
	}
	if root.Style&yaml.FlowStyle != 0 || dataKey.Column != 1 || dataVal.Kind != yaml.MappingNode {
		return nil, "", "", false, errors.New("an answer of `strata pillar get` whose data cannot be taken out as written: " +
			"keep the block layout pillar get -o yaml prints (data: a mapping), or store the data alone")
	}
	lines := strings.SplitAfter(string(b), "\n")
	var out strings.Builder
	for i, ln := range lines {
		n := i + 1
		switch {
		case n == 1 && dataKey.Line > 1:
			// strata's own answer, not an SLS file: plain YAML for the server, whose default
			// renderer (jinja|yaml, as Salt's) would take a "{{" in the data for a template.
			out.WriteString("#!yaml\n")
		case n < dataKey.Line, next != 0 && n >= next:
			if strings.HasSuffix(ln, "\n") {
				out.WriteString("\n")
			}
		case n == dataKey.Line:
			// "data: {a: 1}" or "data:" with the mapping below: the key and its colon become
			// spaces, the rest of the line stays where it is.
			cut := strings.Index(ln, ":") + 1
			if cut <= 0 {
				cut = 0
			}
			out.WriteString(strings.Repeat(" ", cut) + ln[cut:])
		default:
			out.WriteString(ln)
		}
	}
	return []byte(out.String()), target, category, true, nil
}

// storePillarFile is `pillar set CATEGORY -f FILE`.
func storePillarFile(cmd *cobra.Command, g *globals, t client.PillarTarget, category, file, ifMatch string) error {
	b, name, err := readPillarFile(cmd, file)
	if err != nil {
		return err
	}
	doc, err := pillarPayload(b, name, t, category)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	p, err := c.PillarSetDocument(cmd.Context(), t, category, doc.body, doc.contentType, doc.name, ifMatch)
	if err != nil {
		return err
	}
	return printStored(cmd, g, p, "")
}

// printStored prints a written row: its warnings, then the row (-o json|yaml) or a line.
func printStored(cmd *cobra.Command, g *globals, p client.Pillar, what string) error {
	for _, w := range p.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	return g.print(p, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s %s %srevision %d (ETag %s)\n", p.Target, p.Category, what, p.Revision, p.ETag)
		return err
	})
}

// editHeader starts the file `pillar edit` opens. "#!yaml" makes the file plain YAML for
// Salt's renderer (no Jinja), so data holding "{{" is stored as written.
const editHeader = "#!yaml\n" +
	"# Edit the pillar %s of %s (revision %d) and save; quitting without a change stores nothing.\n" +
	"# It is read as Salt reads an SLS file (YAML 1.1: quote yes, on, 1:30 to keep them strings).\n"

// newPillarEditCmd is `strata pillar edit CATEGORY --node|--org|--group|--global`: the row's
// data in $EDITOR as YAML, stored with If-Match so that a change made meanwhile is not
// overwritten; the edited file is kept whenever it is not stored.
func newPillarEditCmd(g *globals, t *client.PillarTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "edit CATEGORY",
		Short: "Edit a target's category in $EDITOR (as YAML, stored only if unchanged meanwhile)",
		Long: "Opens the category's data as YAML in $EDITOR (vi when unset) and stores what is saved,\n" +
			"read as Salt reads an SLS file, with If-Match: when someone changed the row since it\n" +
			"was opened, nothing is stored and the edited file is kept (its path is printed), as it\n" +
			"is when the server refuses it (a YAML error names the file's line and column).",
		Example: "  strata pillar edit apache --node web01\n  EDITOR=nano strata pillar edit ntp --org acme --group web",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			category := args[0]
			c, err := g.client()
			if err != nil {
				return err
			}
			cur, err := c.PillarGet(cmd.Context(), *t, category)
			if client.IsNotFound(err) {
				return fmt.Errorf("%s has no pillar %s to edit: create it with strata pillar set %s %s -f FILE", t.String(), category, category, targetFlags(*t))
			}
			if err != nil {
				return err
			}
			data := cur.Data
			if len(data) == 0 {
				data = json.RawMessage("{}")
			}
			y, err := jsonToYAML(data)
			if err != nil {
				return err
			}
			if string(y) == "{}\n" {
				y = nil // an empty pillar: an empty document, to be filled in
			}
			original := append([]byte(fmt.Sprintf(editHeader, category, cur.Target, cur.Revision)), y...)
			f, err := os.CreateTemp("", "strata-pillar-"+category+"-*.yaml") // mode 0600
			if err != nil {
				return err
			}
			path := f.Name()
			if _, err := f.Write(original); err != nil {
				f.Close()
				os.Remove(path)
				return err
			}
			if err := f.Close(); err != nil {
				os.Remove(path)
				return err
			}
			if err := runEditor(cmd, path); err != nil {
				return fmt.Errorf("%w; the file is kept at %s", err, path)
			}
			edited, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Equal(edited, original) {
				os.Remove(path)
				fmt.Fprintf(cmd.ErrOrStderr(), "no change: %s %s stays at revision %d\n", cur.Target, category, cur.Revision)
				return nil
			}
			p, err := c.PillarSetDocument(cmd.Context(), *t, category, edited, "application/yaml", path, cur.ETag)
			switch {
			case client.IsPreconditionFailed(err):
				return fmt.Errorf("%s %s changed while you edited it (you opened revision %d), so nothing was stored.\n"+
					"Your edit is kept in %s: run strata pillar edit %s %s again and redo it there, "+
					"or store your file over the newer revision with strata pillar set %s %s -f %s",
					cur.Target, category, cur.Revision, path, category, targetFlags(*t), category, targetFlags(*t), path)
			case err != nil:
				return fmt.Errorf("%w\nnothing was stored; your edit is kept in %s (fix it and store it with strata pillar set %s %s -f %s)",
					err, path, category, targetFlags(*t), path)
			}
			os.Remove(path)
			return printStored(cmd, g, p, "")
		},
	}
}

// runEditor runs $EDITOR (vi when unset) on path, through the shell so that EDITOR may hold
// arguments ("code --wait"), on the terminal of the command.
func runEditor(cmd *cobra.Command, path string) error {
	editor := os.Getenv("EDITOR")
	if strings.TrimSpace(editor) == "" {
		editor = "vi"
	}
	e := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$1"`, "strata-editor", path)
	e.Stdin, e.Stdout, e.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := e.Run(); err != nil {
		return fmt.Errorf("the editor (%s) failed: %v", editor, err)
	}
	return nil
}

// targetFlags spells a target as the pillar commands' flags, for the commands a message
// suggests.
func targetFlags(t client.PillarTarget) string {
	switch {
	case t.Node != "":
		return "--node " + t.Node
	case t.Group != "":
		return "--org " + t.Org + " --group " + t.Group
	case t.Org != "":
		return "--org " + t.Org
	}
	return "--global"
}

// newPillarRestoreCmd is `strata pillar restore CATEGORY REVISION`: the data the category had
// at REVISION (the REVISION column of `pillar history`) written back as a new revision.
func newPillarRestoreCmd(g *globals, t *client.PillarTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "restore CATEGORY REVISION",
		Short: "Store the data a category had at an earlier revision (see pillar history) as a new revision",
		Long: "Writes the data the category held at REVISION (the REVISION column of `strata pillar\n" +
			"history`) back as a new revision, and prints it. A row deleted and created again numbers\n" +
			"its revisions anew: REVISION is then the newest entry with that number.",
		Example: "  strata pillar history apache --node web01\n  strata pillar restore apache --node web01 3",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			category := args[0]
			rev, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || rev < 1 {
				return fmt.Errorf("REVISION %q: a revision number from the REVISION column of strata pillar history %s %s", args[1], category, targetFlags(*t))
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			entry, err := findRevision(cmd, c, *t, category, rev)
			if err != nil {
				return err
			}
			p, err := c.PillarRestore(cmd.Context(), *t, category, entry, "")
			if err != nil {
				return err
			}
			return printStored(cmd, g, p, fmt.Sprintf("restored from revision %d as ", rev))
		},
	}
}

// findRevision resolves a revision of the category's history to its entry id, newest first:
// the entry that made the row that revision (a deletion entry holds no data to restore).
func findRevision(cmd *cobra.Command, c *client.Client, t client.PillarTarget, category string, rev int64) (int64, error) {
	deleted := false
	var before int64
	for {
		hs, err := c.PillarHistory(cmd.Context(), t, category, before, 1000)
		if err != nil {
			return 0, err
		}
		for _, h := range hs {
			if h.Revision != rev {
				continue
			}
			if len(h.New) == 0 || string(h.New) == "null" {
				deleted = true
				continue
			}
			return h.ID, nil
		}
		if len(hs) < 1000 {
			break
		}
		before = hs[len(hs)-1].ID
	}
	if deleted {
		return 0, fmt.Errorf("revision %d of %s %s deleted it: restore the revision before it (strata pillar history %s %s)", rev, t.String(), category, category, targetFlags(t))
	}
	return 0, fmt.Errorf("%s %s has no revision %d: see strata pillar history %s %s", t.String(), category, rev, category, targetFlags(t))
}
