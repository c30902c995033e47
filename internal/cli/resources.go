package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

// kindCLI describes one kind to the generic commands: every kind gets the same create, get,
// list, delete, label and annotate, and the kind adds only its own flags.
type kindCLI struct {
	noun, plural, kind string
	// inOrg kinds need --org (groups).
	inOrg bool
	// specFlags adds the kind's flags for create; spec turns them into the spec.
	specFlags func(cmd *cobra.Command)
	spec      func() (map[string]any, error)
	// extra adds kind-specific subcommands.
	extra func(g *globals, org *string) []*cobra.Command
}

// parseKV parses repeated key=value flags.
func parseKV(flag string, kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want key=value", flag, kv)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--%s: key %q given twice", flag, k)
		}
		m[k] = v
	}
	return m, nil
}

// parseEdits parses kubectl-style label edits: key=value sets, key- removes (JSON null in the
// merge patch).
func parseEdits(args []string) (map[string]any, error) {
	m := map[string]any{}
	for _, a := range args {
		if k, ok := strings.CutSuffix(a, "-"); ok && !strings.Contains(a, "=") {
			m[k] = nil
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value to set or key- to remove", a)
		}
		m[k] = v
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("nothing to change: give key=value or key-")
	}
	return m, nil
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func newKindCmd(g *globals, k kindCLI) *cobra.Command {
	cmd := &cobra.Command{Use: k.noun, Short: "Manage " + k.plural}
	var org string
	if k.inOrg {
		cmd.PersistentFlags().StringVar(&org, "org", "", "the org the "+k.noun+" belongs to (required)")
		_ = cmd.MarkPersistentFlagRequired("org")
	}
	res := func() (*client.Resources, error) {
		c, err := g.client()
		if err != nil {
			return nil, err
		}
		return c.Resources(k.plural, org), nil
	}
	show := func(out client.Object) error {
		return g.print(out, func(w io.Writer) error { return g.objectTable(w, k.kind, out) })
	}

	var labels, annotations []string
	var specFile string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a " + k.noun,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj := client.Object{Kind: k.kind, Metadata: client.ObjectMeta{Name: args[0]}}
			var err error
			if obj.Metadata.Labels, err = parseKV("label", labels); err != nil {
				return err
			}
			if obj.Metadata.Annotations, err = parseKV("annotation", annotations); err != nil {
				return err
			}
			spec := map[string]any{}
			if specFile != "" {
				b, err := os.ReadFile(specFile)
				if err != nil {
					return err
				}
				d := json.NewDecoder(strings.NewReader(string(b)))
				d.UseNumber()
				if err := d.Decode(&spec); err != nil {
					return fmt.Errorf("--spec %s: not a JSON object: %v", specFile, err)
				}
			}
			if k.spec != nil {
				extra, err := k.spec()
				if err != nil {
					return err
				}
				for key, v := range extra {
					spec[key] = v
				}
			}
			if obj.Spec, err = json.Marshal(spec); err != nil {
				return err
			}
			r, err := res()
			if err != nil {
				return err
			}
			out, err := r.Create(cmd.Context(), obj)
			if err != nil {
				return err
			}
			return show(out)
		},
	}
	create.Flags().StringArrayVarP(&labels, "label", "l", nil, "label key=value (repeatable)")
	create.Flags().StringArrayVar(&annotations, "annotation", nil, "annotation key=value (repeatable)")
	create.Flags().StringVar(&specFile, "spec", "", "file holding the spec as a JSON object")
	if k.specFlags != nil {
		k.specFlags(create)
	}

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a " + k.noun,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := res()
			if err != nil {
				return err
			}
			out, err := r.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return show(out)
		},
	}

	var selector string
	var orgs orgListFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List " + k.plural,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inOrg, err := orgs.options()
			if err != nil {
				return err
			}
			r, err := res()
			if err != nil {
				return err
			}
			all, err := r.ListAll(cmd.Context(), client.ListOptions{LabelSelector: selector, Org: inOrg})
			if err != nil {
				return err
			}
			return g.print(all, func(w io.Writer) error { return g.objectTable(w, k.kind, all.Items...) })
		},
	}
	list.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. 'env=prod,tier in (web,db),!retired'")
	if orgReferences[k.kind] != "" {
		list.Flags().StringVar(&orgs.org, "org", "", "list the "+k.plural+" of this org only")
		orgs.addAllOrgs(list.Flags())
	}

	var rv string
	var cascade bool
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a " + k.noun,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := res()
			if err != nil {
				return err
			}
			if err := r.Delete(cmd.Context(), args[0], client.DeleteOptions{ResourceVersion: rv, Cascade: cascade}); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s %s deleted\n", k.noun, args[0])
			return nil
		},
	}
	del.Flags().StringVar(&rv, "resource-version", "", "delete only if the "+k.noun+" is still at this resourceVersion")
	if k.kind == "Org" {
		del.Flags().BoolVar(&cascade, "cascade", false, "also delete the org's nodes and groups (refused otherwise while it has any)")
	}

	edit := func(field string) *cobra.Command {
		return &cobra.Command{
			Use:   field[:len(field)-1] + " NAME KEY=VALUE|KEY- ...",
			Short: "Set (key=value) or remove (key-) " + field + " of a " + k.noun,
			Args:  cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				edits, err := parseEdits(args[1:])
				if err != nil {
					return err
				}
				patch, err := json.Marshal(map[string]any{"metadata": map[string]any{field: edits}})
				if err != nil {
					return err
				}
				r, err := res()
				if err != nil {
					return err
				}
				out, err := r.Patch(cmd.Context(), args[0], patch)
				if err != nil {
					return err
				}
				return show(out)
			},
		}
	}
	label, annotate := edit("labels"), edit("annotations")
	annotate.Use = "annotate NAME KEY=VALUE|KEY- ..."

	allowWide(create, get, list, label, annotate)
	cmd.AddCommand(create, get, list, del, label, annotate)
	if k.extra != nil {
		cmd.AddCommand(k.extra(g, &org)...)
	}
	return cmd
}

func newOrgCmd(g *globals) *cobra.Command {
	return newKindCmd(g, kindCLI{noun: "org", plural: "orgs", kind: "Org"})
}
