package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/client"
)

// orgReferences are the spec members through which the objects of a global built-in kind
// belong to an org: the CLI's copy of the server's kind descriptors (resource.Kind.OrgMember),
// which client commands may not import. Lists of these kinds take --org (sent as ?org=, which
// the server filters on) and -A/--all-orgs, and their tables show an ORG column. A stale copy
// fails loudly: the server refuses ?org= for a kind without an org reference.
var orgReferences = map[string]string{"Node": "org"}

// builtinKind is the built-in kind a command-line noun names (any case, singular or plural),
// or "" for every other name (a user kind).
func builtinKind(noun string) string {
	switch strings.ToLower(noun) {
	case "org", "orgs":
		return "Org"
	case "node", "nodes":
		return "Node"
	case "group", "groups":
		return "Group"
	}
	return ""
}

// orgOf is the org an object belongs to: metadata.org for kinds inside an org, the spec
// member of its org reference for kinds with one (a node's spec.org), "" otherwise.
func orgOf(o client.Object) string {
	if o.Metadata.Org != "" {
		return o.Metadata.Org
	}
	member := orgReferences[o.Kind]
	if member == "" {
		return ""
	}
	var spec map[string]any
	if err := json.Unmarshal(o.Spec, &spec); err != nil {
		return ""
	}
	org, _ := spec[member].(string)
	return org
}

// orgListFlags are the --org and -A/--all-orgs of a list of a kind with an org reference.
// Without either, the list holds every org the token may see (as before these flags
// existed); -A says so explicitly.
type orgListFlags struct {
	org string
	all bool
}

// addAllOrgs adds -A/--all-orgs; --org is added by the caller, whose usage text differs.
func (f *orgListFlags) addAllOrgs(fs *pflag.FlagSet) {
	fs.BoolVarP(&f.all, "all-orgs", "A", false, "list the nodes of every org the token may see (the default without --org)")
}

// options is the list's org filter: --org ORG, or every org; both at once are a usage error.
func (f *orgListFlags) options() (string, error) {
	if f.org != "" && f.all {
		return "", errors.New("--org and -A/--all-orgs exclude each other: give one")
	}
	return f.org, nil
}

// resolveList resolves KIND for `get` and `watch` with --org and -A: a kind with an org
// reference (node) lists the objects of --org (returned as the list's org filter) or of every
// org; a kind inside an org (group, user kinds of scope org) takes --org as its org; for any
// other kind --org and -A are usage errors, never ignored.
func resolveList(ctx context.Context, c *client.Client, noun string, f orgListFlags) (*client.Resources, string, string, error) {
	name := builtinKind(noun)
	if orgReferences[name] != "" {
		inOrg, err := f.options()
		if err != nil {
			return nil, "", "", err
		}
		res, kind, err := objectsFor(ctx, c, noun, "")
		return res, kind, inOrg, err
	}
	if f.all {
		return nil, "", "", fmt.Errorf("-A/--all-orgs applies to kinds whose objects belong to an org (node); %s: give --org ORG or drop -A", noun)
	}
	if name == "Org" && f.org != "" {
		return nil, "", "", errors.New("orgs belong to no org: drop --org")
	}
	res, kind, err := objectsFor(ctx, c, noun, f.org)
	return res, kind, "", err
}

// checkInOrg refuses an object named with --org that is not in that org (`get node web01
// --org acme` when web01 is in globex), as a list of that org would not hold it.
func checkInOrg(obj client.Object, kind, org string) error {
	if org == "" || orgReferences[kind] == "" {
		return nil
	}
	if got := orgOf(obj); got != org {
		return fmt.Errorf("%s %q is in org %q, not %q", strings.ToLower(kind), obj.Metadata.Name, got, org)
	}
	return nil
}

// wideAnnotation marks the commands whose tables have a wide form (-o wide); every other
// command refuses -o wide before it does anything, instead of printing its usual table.
const wideAnnotation = "strata/wide"

// allowWide lets cmds print -o wide.
func allowWide(cmds ...*cobra.Command) {
	for _, c := range cmds {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[wideAnnotation] = "true"
	}
}

// checkOutput is the check of -o every command runs first: table, json, yaml, and wide where
// the command has a wide table.
func checkOutput(cmd *cobra.Command, output string) error {
	switch output {
	case "table", "json", "yaml":
		return nil
	case "wide":
		if cmd.Annotations[wideAnnotation] != "" {
			return nil
		}
		return fmt.Errorf("-o wide: %s has no wide table; use table, json or yaml", cmd.CommandPath())
	}
	return fmt.Errorf("-o %q: use table, json or yaml (wide for object tables)", output)
}

// objectTable writes objects of kind as a table: NAME, ORG for kinds with an org reference
// (nodes), LABELS, RESOURCE VERSION and AGE. -o wide adds ORG for every kind that has an org
// (in its metadata or through a reference) and ANNOTATIONS.
func (g *globals) objectTable(w io.Writer, kind string, objs ...client.Object) error {
	return objectRows(w, kind, g.output == "wide", objs)
}

func objectRows(w io.Writer, kind string, wide bool, objs []client.Object) error {
	withOrg := orgReferences[kind] != "" || (wide && kind != "Org")
	headers := []string{"NAME"}
	if withOrg {
		headers = append(headers, "ORG")
	}
	headers = append(headers, "LABELS")
	if wide {
		headers = append(headers, "ANNOTATIONS")
	}
	t := newTable(w, append(headers, "RESOURCE VERSION", "AGE")...)
	for _, o := range objs {
		age := ""
		if o.Metadata.CreatedAt != nil {
			age = time.Since(*o.Metadata.CreatedAt).Truncate(time.Second).String()
		}
		row := []string{o.Metadata.Name}
		if withOrg {
			org := orgOf(o)
			if org == "" {
				org = "<none>"
			}
			row = append(row, org)
		}
		row = append(row, formatMap(o.Metadata.Labels))
		if wide {
			row = append(row, formatMap(o.Metadata.Annotations))
		}
		t.row(append(row, o.Metadata.ResourceVersion, age)...)
	}
	return t.flush()
}
