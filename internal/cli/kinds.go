package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/client"
)

func init() {
	extraCommands = append(extraCommands, newKindRegistryCmd, newGetCmd, newApplyCmd, newDeleteCmd)
}

// kindFile is what `strata kind apply -f` reads: the kind's name, its scope and its schema.
type kindFile struct {
	Kind        string           `json:"kind"`
	Scope       string           `json:"scope,omitempty"`
	Schema      json.RawMessage  `json:"schema"`
	Acknowledge []client.KindAck `json:"acknowledge,omitempty"`
}

// readDocs reads a YAML or JSON file ("-" for stdin) holding one or more documents (YAML
// separated by ---) and returns each as JSON.
func readDocs(path string, stdin io.Reader) ([][]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out [][]byte
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if v == nil {
			continue
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no document", path)
	}
	return out, nil
}

// parseAcks parses --ack PATH=RULE flags.
func parseAcks(flags []string) ([]client.KindAck, error) {
	var out []client.KindAck
	for _, f := range flags {
		p, r, ok := strings.Cut(f, "=")
		if !ok || p == "" || r == "" {
			return nil, fmt.Errorf("--ack %q: want PATH=RULE, e.g. /spec/size=readersUpgradedFirst", f)
		}
		out = append(out, client.KindAck{Path: p, Rule: r})
	}
	return out, nil
}

func reportTable(w io.Writer, res client.KindResult) error {
	switch {
	case res.Unchanged:
		fmt.Fprintf(w, "%s: unchanged (revision %d)\n", res.Kind, res.Revision)
		return nil
	case res.DryRun:
		fmt.Fprintf(w, "%s: would register revision %d; compatible: %v (against revisions %v, %s scanned)\n", res.Kind, res.Revision, res.Report.Compatible, res.Report.Against, count(res.Report.Scanned, "object"))
	default:
		fmt.Fprintf(w, "%s: registered revision %d (against revisions %v, %s scanned)\n", res.Kind, res.Revision, res.Report.Against, count(res.Report.Scanned, "object"))
	}
	return findingsTable(w, res.Report)
}

// ackPath is the path a finding is acknowledged by: the field the report shows (/spec/size),
// which the registry accepts as well as the schema pointer (/properties/size).
func ackPath(f client.KindFinding) string {
	if f.Field != "" {
		return f.Field
	}
	return f.Path
}

// findingsTable prints a report's findings. The changes an earlier registration already
// decided (Earlier) are context, not questions: they are folded into one line after the
// table, so a report shows each decision once — in the revision that made it.
func findingsTable(w io.Writer, rep client.KindReport) error {
	var current, earlier []client.KindFinding
	for _, f := range rep.Changes {
		if f.Earlier {
			earlier = append(earlier, f)
		} else {
			current = append(current, f)
		}
	}
	if len(current) > 0 {
		t := newTable(w, "VERDICT", "FIELD", "RULE", "AFFECTED", "MESSAGE")
		for _, f := range current {
			verdict := f.Verdict
			switch {
			case f.Acknowledged:
				verdict += " (acknowledged)"
			case f.Verdict == "acknowledge":
				verdict += " (--ack " + ackPath(f) + "=" + f.Ack + ")"
			}
			affected := ""
			if f.Impact != nil {
				affected = strconv.Itoa(f.Impact.Count)
				if len(f.Impact.Sample) > 0 {
					affected += " " + strings.Join(f.Impact.Sample, ",")
				}
			}
			msg := f.Message
			if f.WayForward != "" {
				msg += " — " + f.WayForward
			}
			t.row(verdict, f.Field, f.Rule, affected, msg)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(earlier) > 0 {
		var revs []int
		for _, f := range earlier {
			revs = append(revs, f.Against)
		}
		slices.Sort(revs)
		revs = slices.Compact(revs)
		since := make([]string, len(revs))
		for i, r := range revs {
			since[i] = strconv.Itoa(r)
		}
		what := "revision " + since[0]
		if len(since) > 1 {
			what = "revisions " + strings.Join(since, ", ")
		}
		_, err := fmt.Fprintf(w, "%s decided since %s (use -o json to see them)\n", count(len(earlier), "earlier finding"), what)
		return err
	}
	return nil
}

// warnRedundant prints a warning naming each acknowledgement the registration did not need,
// as the user gave it: an --ack flag, or an entry of the file's acknowledge list.
func warnRedundant(w io.Writer, rep client.KindReport, flags []client.KindAck) {
	for _, a := range rep.RedundantAcks {
		name := fmt.Sprintf("acknowledge {path: %s, rule: %s}", a.Path, a.Rule)
		if slices.Contains(flags, client.KindAck{Path: a.Path, Rule: a.Rule}) {
			name = "--ack " + a.Path + "=" + a.Rule
		}
		fmt.Fprintf(w, "warning: %s is not needed: %s\n", name, a.Reason)
	}
}

func newKindRegistryCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kind", Short: "Register and inspect kinds (JSON schemas that evolve without API versions)"}
	var (
		file   string
		dryRun bool
		acks   []string
	)
	register := func(cmd *cobra.Command, dry bool) error {
		docs, err := readDocs(file, cmd.InOrStdin())
		if err != nil {
			return err
		}
		extra, err := parseAcks(acks)
		if err != nil {
			return err
		}
		c, err := g.client()
		if err != nil {
			return err
		}
		for _, d := range docs {
			var kf kindFile
			dec := json.NewDecoder(bytes.NewReader(d))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&kf); err != nil {
				return fmt.Errorf("%s: a kind file has kind, scope, schema and optionally acknowledge: %v", file, err)
			}
			if kf.Kind == "" {
				return fmt.Errorf("%s: kind is required", file)
			}
			res, err := c.KindApply(cmd.Context(), kf.Kind, client.KindRequest{Scope: kf.Scope, Schema: kf.Schema, Acknowledge: append(kf.Acknowledge, extra...)}, dry)
			var apiErr *client.Error
			if errors.As(err, &apiErr) && apiErr.Problem.Report != nil {
				_ = findingsTable(cmd.ErrOrStderr(), *apiErr.Problem.Report)
				warnRedundant(cmd.ErrOrStderr(), *apiErr.Problem.Report, extra)
				return err
			}
			if err != nil {
				return err
			}
			warnRedundant(cmd.ErrOrStderr(), res.Report, extra)
			if err := g.print(res, func(w io.Writer) error { return reportTable(w, res) }); err != nil {
				return err
			}
			if dry && !res.Report.Compatible {
				return fmt.Errorf("%s: the change is not compatible as it stands (see the report)", kf.Kind)
			}
		}
		return nil
	}
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Register the next revision of a kind's schema (checked against the stored objects)",
		Long: "FILE (YAML or JSON, - for stdin) holds kind, scope (org or global) and schema, a JSON Schema\n" +
			"(2020-12, strata's structural subset) of the objects' spec. A change that a rule rejects, or\n" +
			"that needs an acknowledgement not given with --ack PATH=RULE, is refused with the report.\n" +
			"Changes an earlier revision decided are one line after the table (-o json lists them);\n" +
			"an --ack no change needed is a warning naming it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return register(cmd, dryRun) },
	}
	apply.Flags().StringVarP(&file, "filename", "f", "", "the kind file (required)")
	apply.Flags().BoolVar(&dryRun, "dry-run", false, "report only; register nothing")
	apply.Flags().StringArrayVar(&acks, "ack", nil, "acknowledge a change: PATH=RULE (repeatable)")
	_ = apply.MarkFlagRequired("filename")
	diff := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Show what registering FILE would change and whether it is compatible (exit 1 when not)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return register(cmd, true) },
	}
	diff.Flags().StringVarP(&file, "filename", "f", "", "the kind file (required)")
	diff.Flags().StringArrayVar(&acks, "ack", nil, "acknowledge a change: PATH=RULE (repeatable)")
	_ = diff.MarkFlagRequired("filename")
	list := &cobra.Command{
		Use: "list", Short: "List kinds", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ks, err := c.Kinds(cmd.Context())
			if err != nil {
				return err
			}
			return g.printList(ks, func(w io.Writer) error {
				t := newTable(w, "NAME", "SCOPE", "REVISION", "BUILT-IN")
				for _, k := range ks {
					t.row(k.Name, k.Scope, strconv.Itoa(k.Revision), strconv.FormatBool(k.Builtin))
				}
				return t.flush()
			})
		},
	}
	get := &cobra.Command{
		Use: "get KIND", Short: "Show a kind and its current schema", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			k, err := c.Kind(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.print(k, func(w io.Writer) error {
				fmt.Fprintf(w, "%s (scope %s, revision %d)\n", k.Name, k.Scope, k.Revision)
				y, err := jsonToYAML(k.Schema)
				if err != nil {
					return err
				}
				_, err = w.Write(y)
				return err
			})
		},
	}
	revisions := &cobra.Command{
		Use: "revisions KIND", Short: "List a kind's revisions and their reports", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			revs, err := c.KindRevisions(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.printList(revs, func(w io.Writer) error {
				t := newTable(w, "REVISION", "CREATED", "BY", "CHANGES")
				for _, r := range revs {
					// A revision's changes are its own: those an earlier revision decided
					// are counted there (-o json lists them all).
					n := 0
					for _, f := range r.Report.Changes {
						if !f.Earlier {
							n++
						}
					}
					t.row(strconv.Itoa(r.Revision), r.CreatedAt.Format("2006-01-02 15:04:05"), r.CreatedBy, strconv.Itoa(n))
				}
				return t.flush()
			})
		},
	}
	cmd.AddCommand(apply, diff, list, get, revisions)
	return cmd
}

// objectsFor returns the client of kind's objects: the built-in kinds by their nouns (org,
// node, group, singular or plural, any case), every other name as a user kind, resolved in
// the registry case-insensitively (`get database` finds Database; the registry refuses names
// that differ only in case) and by its plural (`get caches` finds Cache), inside org when
// one is given. A kind that is not registered is
// an error with the nearest names; one of the other scope names the flag to give or drop. A
// token that may not read the registry (kinds:read) skips the resolution and the server
// judges the name as given.
//
// The built-in nouns are matched case-insensitively; the registry refuses user kinds whose
// names fold to them (kind.ValidateKindName), so no user kind is shadowed.
func objectsFor(ctx context.Context, c *client.Client, kind, org string) (*client.Resources, string, error) {
	switch strings.ToLower(kind) {
	case "org", "orgs":
		return c.Orgs(), "Org", nil
	case "node", "nodes":
		return c.Nodes(), "Node", nil
	case "group", "groups":
		if org == "" {
			return nil, "", errors.New("groups live in an org: give --org ORG")
		}
		return c.Groups(org), "Group", nil
	}
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return c.Objects(kind, org), kind, nil
	}
	var found *client.KindInfo
	for i, k := range kinds {
		if k.Name == kind || (found == nil && strings.EqualFold(k.Name, kind)) {
			found = &kinds[i]
		}
	}
	if found == nil {
		found = pluralOf(kind, kinds)
	}
	if found == nil {
		var names []string
		for _, k := range kinds {
			if !k.Builtin {
				names = append(names, k.Name)
			}
		}
		msg := fmt.Sprintf("kind %q is not registered", kind)
		if near := nearest(kind, names); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, " or ") + "?"
		} else {
			msg += " (`strata kind list` shows the kinds)"
		}
		return nil, "", errors.New(msg)
	}
	switch {
	case found.Scope == "org" && org == "":
		return nil, "", fmt.Errorf("kind %s lives in orgs: give --org ORG", found.Name)
	case found.Scope == "global" && org != "":
		return nil, "", fmt.Errorf("kind %s is global: its objects belong to no org, drop --org", found.Name)
	}
	return c.Objects(found.Name, org), found.Name, nil
}

// pluralOf finds the kind a plural names, as kubectl's resource names are plural (`get
// caches` for Cache, `get policies` for Policy): the name less "s", "es", or "ies" for "y",
// compared case-insensitively; nil when none is registered.
func pluralOf(name string, kinds []client.KindInfo) *client.KindInfo {
	lower := strings.ToLower(name)
	var singulars []string
	if s, ok := strings.CutSuffix(lower, "ies"); ok {
		singulars = append(singulars, s+"y")
	}
	if s, ok := strings.CutSuffix(lower, "s"); ok {
		singulars = append(singulars, s)
	}
	if s, ok := strings.CutSuffix(lower, "es"); ok {
		singulars = append(singulars, s)
	}
	for _, s := range singulars {
		for i, k := range kinds {
			if !k.Builtin && strings.ToLower(k.Name) == s {
				return &kinds[i]
			}
		}
	}
	return nil
}

// nearest returns the names within two edits of s (case aside), nearest first.
func nearest(s string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(n)); d <= 2 {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func newGetCmd(g *globals) *cobra.Command {
	var orgs orgListFlags
	var selector string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "Read one object of any kind, or list them",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && orgs.all {
				return errors.New("-A/--all-orgs lists; an object named by NAME is read as it is: drop -A")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, kind, inOrg, err := resolveList(cmd.Context(), c, args[0], orgs)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				obj, err := res.Get(cmd.Context(), args[1])
				if err != nil {
					return err
				}
				if err := checkInOrg(obj, kind, inOrg); err != nil {
					return err
				}
				return g.print(obj, func(w io.Writer) error { return g.objectTable(w, kind, obj) })
			}
			list, err := res.ListAll(cmd.Context(), client.ListOptions{LabelSelector: selector, Org: inOrg})
			if err != nil {
				return err
			}
			return g.print(list, func(w io.Writer) error { return g.objectTable(w, kind, list.Items...) })
		},
	}
	cmd.Flags().StringVar(&orgs.org, "org", "", "the org: of kinds that live in orgs, or whose objects belong to one (node)")
	orgs.addAllOrgs(cmd.Flags())
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. env=prod,tier in (web,db)")
	allowWide(cmd)
	return cmd
}

func newApplyCmd(g *globals) *cobra.Command {
	var org, file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace the objects in FILE (YAML or JSON, several separated by ---)",
		Long: "Each document is an object: kind, metadata (name, and org for kinds that live in orgs, or\n" +
			"--org), and spec. It is created, or replaced when it exists. Warnings from the kind's schema\n" +
			"(deprecated or removed fields) are printed to stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := readDocs(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			for i, d := range docs {
				var obj client.Object
				dec := json.NewDecoder(bytes.NewReader(d))
				dec.UseNumber()
				if err := dec.Decode(&obj); err != nil {
					return fmt.Errorf("%s: document %d: %v", file, i+1, err)
				}
				if obj.Kind == "" || obj.Metadata.Name == "" {
					return fmt.Errorf("%s: document %d: kind and metadata.name are required", file, i+1)
				}
				o := obj.Metadata.Org
				if o == "" {
					o = org
				}
				res, kind, err := objectsFor(cmd.Context(), c, obj.Kind, o)
				if err != nil {
					return err
				}
				obj.Kind = kind
				out, warnings, err := res.Put(cmd.Context(), obj)
				for _, w := range warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				if err != nil {
					return applyStopped(err, kind, obj.Metadata.Name, i, len(docs))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s applied (resourceVersion %s, schema revision %d)\n", kind, out.Metadata.Name, out.Metadata.ResourceVersion, out.Metadata.SchemaRevision)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the objects (required; - for stdin)")
	cmd.Flags().StringVar(&org, "org", "", "the org, for objects that do not name one")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete an object of any kind",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, kind, inOrg, err := resolveList(cmd.Context(), c, args[0], orgListFlags{org: org})
			if err != nil {
				return err
			}
			var opts client.DeleteOptions
			if inOrg != "" {
				// A node named with --org: deleted only if it is in that org, and still at the
				// version read (a move meanwhile is a 409, not a deletion in another org).
				obj, err := res.Get(cmd.Context(), args[1])
				if err != nil {
					return err
				}
				if err := checkInOrg(obj, kind, inOrg); err != nil {
					return err
				}
				opts.ResourceVersion = obj.Metadata.ResourceVersion
			}
			if err := res.Delete(cmd.Context(), args[1], opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted\n", kind, args[1])
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "the org: of kinds that live in orgs, or the node's (checked before it is deleted)")
	return cmd
}
