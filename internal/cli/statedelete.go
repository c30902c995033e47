package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

// newStateDeleteCmd is `strata state delete`: terraform's http backend DELETE on a
// workspace, which Terraform itself only sends from `terraform workspace delete`. It asks
// for --yes because terraform then sees an empty workspace and would create everything
// anew; the versions are kept, so the answer says which one brings the state back.
func newStateDeleteCmd(g *globals) *cobra.Command {
	var (
		yes    bool
		lockID string
	)
	cmd := &cobra.Command{
		Use:   "delete PROJECT WORKSPACE --yes",
		Short: "Delete a workspace's state (its versions are kept, so it can be restored)",
		Long: `Delete a workspace's state, as terraform's http backend DELETE does. Terraform then sees an
empty workspace: a plan would create every resource again. The state's versions are kept, so
strata state restore PROJECT WORKSPACE N brings it back; they go only with the project.

It refuses without --yes, and while someone holds the workspace's lock (pass --lock-id when
you hold it yourself).`,
		Example: "  strata state delete net staging --yes\n" +
			"  strata state delete net staging --yes --lock-id 3f2a…    # while you hold its lock",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			project, workspace := args[0], args[1]
			c, err := g.client()
			if err != nil {
				return err
			}
			wss, err := c.WorkspaceList(cmd.Context(), project)
			if err != nil {
				return err
			}
			var ws *client.Workspace
			for i := range wss {
				if wss[i].Name == workspace && !wss[i].Placeholder {
					ws = &wss[i]
				}
			}
			if ws == nil {
				return fmt.Errorf("workspace %s/%s has no state (strata state list %s shows those that do)", project, workspace, project)
			}
			back := fmt.Sprintf("strata state restore %s %s %d brings it back", project, workspace, ws.Version)
			if !yes {
				serial := ""
				if ws.Serial != nil {
					serial = fmt.Sprintf("serial %d, ", *ws.Serial)
				}
				return fmt.Errorf("deleting the state of %s/%s (%sversion %d) leaves terraform an empty workspace: give --yes to delete it. Its versions are kept: %s",
					project, workspace, serial, ws.Version, back)
			}
			err = c.StateDelete(cmd.Context(), project, workspace, lockID)
			if holder, ok := client.LockHolder(err); ok {
				return stateDeleteLocked(project, workspace, holder)
			}
			if err != nil {
				return err
			}
			out := struct {
				Project   string `json:"project"`
				Workspace string `json:"workspace"`
				Deleted   bool   `json:"deleted"`
				// Version is the last version, the one that restores the deleted state.
				Version int64 `json:"version"`
			}{project, workspace, true, ws.Version}
			return g.print(out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "state of %s/%s deleted; its versions are kept: %s\n", project, workspace, back)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "delete without asking: terraform then sees an empty workspace")
	cmd.Flags().StringVar(&lockID, "lock-id", "", "the lock ID, when you hold the workspace's lock")
	return cmd
}

// stateDeleteLocked says who holds a workspace's lock and how to free it, from a 423's LockInfo
// and the command's own arguments (the body's Path is empty).
func stateDeleteLocked(project, workspace string, h client.LockInfo) error {
	if h.ID == "" {
		return fmt.Errorf("%s/%s is locked by a pg backend client (strata state show %s %s says which); free it with strata state unlock %s %s --force",
			project, workspace, project, workspace, project, workspace)
	}
	return fmt.Errorf("%s/%s is locked by %s (lock ID %s, %s since %s); free it with strata state unlock %s %s %s, or pass --lock-id %s if the lock is yours",
		project, workspace, h.Who, h.ID, h.Operation, h.Created.Format(time.RFC3339), project, workspace, h.ID, h.ID)
}
