package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

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

func objectTable(w io.Writer, objs ...client.Object) error {
	t := newTable(w, "NAME", "LABELS", "RESOURCE VERSION", "AGE")
	for _, o := range objs {
		age := ""
		if o.Metadata.CreatedAt != nil {
			age = time.Since(*o.Metadata.CreatedAt).Truncate(time.Second).String()
		}
		t.row(o.Metadata.Name, formatMap(o.Metadata.Labels), o.Metadata.ResourceVersion, age)
	}
	return t.flush()
}

func newOrgCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "org", Short: "Manage orgs"}

	var labels, annotations []string
	var specFile string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an org",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj := client.Object{Kind: "Org", Metadata: client.ObjectMeta{Name: args[0]}}
			var err error
			if obj.Metadata.Labels, err = parseKV("label", labels); err != nil {
				return err
			}
			if obj.Metadata.Annotations, err = parseKV("annotation", annotations); err != nil {
				return err
			}
			if specFile != "" {
				b, err := os.ReadFile(specFile)
				if err != nil {
					return err
				}
				if !json.Valid(b) {
					return fmt.Errorf("--spec %s: not valid JSON", specFile)
				}
				obj.Spec = b
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.OrgCreate(cmd.Context(), obj)
			if err != nil {
				return err
			}
			return g.print(out, func(w io.Writer) error { return objectTable(w, out) })
		},
	}
	create.Flags().StringArrayVarP(&labels, "label", "l", nil, "label key=value (repeatable)")
	create.Flags().StringArrayVar(&annotations, "annotation", nil, "annotation key=value (repeatable)")
	create.Flags().StringVar(&specFile, "spec", "", "file holding the spec as a JSON object")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show an org",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.OrgGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.print(out, func(w io.Writer) error { return objectTable(w, out) })
		},
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List orgs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var all client.ObjectList
			opts := client.ListOptions{}
			for {
				page, err := c.OrgList(cmd.Context(), opts)
				if err != nil {
					return err
				}
				all.Items = append(all.Items, page.Items...)
				all.ResourceVersion = page.ResourceVersion
				if page.Continue == "" {
					break
				}
				opts.Continue = page.Continue
			}
			if all.Items == nil {
				all.Items = []client.Object{}
			}
			return g.print(all, func(w io.Writer) error { return objectTable(w, all.Items...) })
		},
	}

	var rv string
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an org",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.OrgDelete(cmd.Context(), args[0], rv); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "org %s deleted\n", args[0])
			return nil
		},
	}
	del.Flags().StringVar(&rv, "resource-version", "", "delete only if the org is still at this resourceVersion")

	cmd.AddCommand(create, get, list, del)
	return cmd
}
