package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
)

func init() {
	extraCommands = append(extraCommands, newProjectCmd, newStateCmd)
}

func newProjectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "project", Short: "Manage Terraform/OpenTofu projects (PostgreSQL schemas)"}

	var encrypt bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project, or adopt an existing pg-backend schema of that name",
		Example: "  strata project create net\n" +
			"  strata project create vault --encrypt    # states stored encrypted (HTTP backend only)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.ProjectCreate(cmd.Context(), args[0], client.Project{Encryption: encrypt})
			if err != nil {
				return err
			}
			return g.print(p, func(w io.Writer) error { return projectTable(w, p) })
		},
	}
	create.Flags().BoolVar(&encrypt, "encrypt", false, "store the project's states encrypted with the server's key (the pg backend cannot use such a project)")

	var (
		batch int
		quiet bool
	)
	encryptCmd := &cobra.Command{
		Use:   "encrypt NAME",
		Short: "Convert a project to encrypted states, in place (every state and version)",
		Long: `Convert an existing project to encrypted states: every state and every version is sealed
with the server's encryption key, in batches, with progress. The first batch marks the project
encrypted, so from then on every write is sealed, and pg backend clients can no longer write
it (use the HTTP backend). It refuses while a workspace is locked (a run is in progress);
run it again to resume an interrupted conversion.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			prog := g.newProgress(0, "states and versions encrypted", quiet)
			total := 0
			for {
				r, err := c.ProjectEncrypt(cmd.Context(), args[0], batch)
				if err != nil {
					prog.abandon()
					return err
				}
				total += r.Converted
				prog.setMax(int64(total) + r.Remaining)
				prog.set(int64(total), int64(total))
				if r.Done {
					break
				}
			}
			prog.finish()
			out := client.ProjectEncryption{Project: args[0], Converted: total, Done: true}
			return g.print(out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "project %s encrypted (%d states and versions converted)\n", args[0], total)
				return err
			})
		},
	}
	encryptCmd.Flags().IntVar(&batch, "batch", 100, "states and versions converted per request (one transaction each)")
	encryptCmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress")
	list := &cobra.Command{
		Use:   "list",
		Short: "List projects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.ProjectList(cmd.Context())
			if err != nil {
				return err
			}
			if ps == nil {
				ps = []client.Project{}
			}
			return g.printList(ps, func(w io.Writer) error { return projectTable(w, ps...) })
		},
	}
	var force bool
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Drop a project's schema (--force while it still holds states)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.ProjectDelete(cmd.Context(), args[0], force); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "project %s deleted\n", args[0])
			return nil
		},
	}
	del.Flags().BoolVar(&force, "force", false, "delete even though workspaces still hold state")

	creds := &cobra.Command{
		Use:   "credentials NAME",
		Short: "Create a database role for pg backend clients of this project and print its conn_str",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			cr, err := c.ProjectCredentials(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.print(cr, func(w io.Writer) error {
				fmt.Fprintf(w, "role:     %s\nconn_str: %s\n\n%s\n", cr.Role, cr.ConnStr, cr.Backend)
				return nil
			})
		},
	}

	backendConfig := newBackendConfigCmd(g)
	cmd.AddCommand(create, list, del, creds, backendConfig, encryptCmd)
	return cmd
}

// backendBlock renders the http backend configuration for a workspace. The token is not
// written into the file: Terraform reads it from TF_HTTP_PASSWORD.
func backendBlock(server, project, workspace string) string {
	base := strings.TrimRight(server, "/") + "/v1/state/" + url.PathEscape(project) + "/" + url.PathEscape(workspace)
	return fmt.Sprintf(`terraform {
  backend "http" {
    address        = %[1]q
    lock_address   = %[1]q
    unlock_address = %[1]q
    # lock_method = "LOCK" and unlock_method = "UNLOCK" are the defaults.
    username = "strata"
    # password: export TF_HTTP_PASSWORD=<a strata token with state:write:%[2]s>
    # 'terraform force-unlock' needs state:force-unlock:%[2]s as well (state:write does not
    # grant it; Terraform shows a bare 403 otherwise):
    #   strata token create %[2]s-team --scope state:write:%[2]s --scope state:force-unlock:%[2]s
  }
}

# Alternative for clients that talk to PostgreSQL directly (the same workspaces and state):
#   strata project credentials %[2]s     prints the conn_str
# terraform {
#   backend "pg" {
#     conn_str    = "<conn_str>"
#     schema_name = %[2]q
#     skip_schema_creation = true
#     skip_table_creation  = true
#     skip_index_creation  = true
#   }
# }
# (with backend "pg" the workspace is chosen with 'terraform workspace select %[3]s';
#  "default" is the default workspace)
`, base, project, workspace)
}

func projectTable(w io.Writer, ps ...client.Project) error {
	t := newTable(w, "NAME", "WORKSPACES", "ADOPTED", "CREATED", "ENCRYPTED")
	for _, p := range ps {
		t.row(p.Name, strconv.Itoa(p.Workspaces), strconv.FormatBool(p.Adopted), p.CreatedAt.UTC().Format(time.RFC3339), strconv.FormatBool(p.Encryption))
	}
	return t.flush()
}

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "state", Short: "Inspect and manage Terraform/OpenTofu state"}

	withClient := func(run func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return run(cmd, c, args)
		}
	}

	list := &cobra.Command{
		Use:   "list PROJECT",
		Short: "List a project's workspaces and their lock holders",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			ws, err := c.WorkspaceList(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if ws == nil {
				ws = []client.Workspace{}
			}
			return g.printList(ws, func(w io.Writer) error {
				t := newTable(w, "WORKSPACE", "SERIAL", "VERSION", "SIZE", "LOCKED BY")
				for _, x := range ws {
					serial := ""
					if x.Serial != nil {
						serial = strconv.FormatInt(*x.Serial, 10)
					}
					t.row(x.Name, serial, strconv.FormatInt(x.Version, 10), strconv.FormatInt(x.Size, 10), lockHolderText(x.Lock))
				}
				return t.flush()
			})
		}),
	}

	show := &cobra.Command{
		Use:   "show PROJECT WORKSPACE",
		Short: "Show a workspace: its lock and its versions",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			lock, err := c.StateLockStatus(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			vs, err := c.StateVersions(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			out := struct {
				Lock     client.LockStatus     `json:"lock"`
				Versions []client.StateVersion `json:"versions"`
			}{lock, vs}
			return g.print(out, func(w io.Writer) error {
				fmt.Fprintf(w, "lock: %s\n\n", orDash(lockHolderText(&lock)))
				return versionTable(w, vs)
			})
		}),
	}

	pull := &cobra.Command{
		Use:   "pull PROJECT WORKSPACE",
		Short: "Print a workspace's state, verbatim",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			b, err := c.StatePull(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(b)
			return err
		}),
	}

	var pushLock string
	push := &cobra.Command{
		Use:   "push PROJECT WORKSPACE FILE",
		Short: "Write a state file (FILE '-' reads standard input); the write rules apply",
		Args:  cobra.ExactArgs(3),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			var b []byte
			var err error
			if args[2] == "-" {
				b, err = io.ReadAll(cmd.InOrStdin())
			} else {
				b, err = os.ReadFile(args[2])
			}
			if err != nil {
				return err
			}
			res, err := c.StatePush(cmd.Context(), args[0], args[1], b, pushLock)
			if err != nil {
				return err
			}
			return g.print(res, func(w io.Writer) error {
				if res.Unchanged {
					fmt.Fprintf(w, "state of %s/%s unchanged (the same bytes are stored as version %d)\n", args[0], args[1], res.Version)
				} else {
					fmt.Fprintf(w, "state of %s/%s written as version %d (%d bytes)\n", args[0], args[1], res.Version, len(b))
				}
				return nil
			})
		}),
	}
	push.Flags().StringVar(&pushLock, "lock-id", "", "the lock ID, when the workspace is locked")

	var lockInfo string
	lock := &cobra.Command{
		Use:   "lock PROJECT WORKSPACE",
		Short: "Take a workspace's lock and print its ID (e.g. to freeze a workspace during maintenance)",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			who, _ := os.Hostname()
			info := client.LockInfo{ID: newLockID(), Operation: "strata-cli", Info: lockInfo, Who: "strata@" + who, Version: Version, Created: time.Now().UTC()}
			got, err := c.StateLock(cmd.Context(), args[0], args[1], info)
			if err != nil { // a holder is reported by lockWords, as for every command
				return err
			}
			return g.print(got, func(w io.Writer) error {
				fmt.Fprintln(w, got.ID)
				return nil
			})
		}),
	}
	lock.Flags().StringVar(&lockInfo, "info", "", "a note stored with the lock")

	var force bool
	unlock := &cobra.Command{
		Use:   "unlock PROJECT WORKSPACE [LOCK_ID]",
		Short: "Release a lock by ID, or --force: end whatever holds it (an HTTP lock, or a pg client's session), audited",
		Args:  cobra.RangeArgs(2, 3),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			id := ""
			if len(args) == 3 {
				id = args[2]
			}
			if id == "" && !force {
				return errors.New("give the lock ID, or --force to end whatever holds the lock")
			}
			if err := c.StateUnlock(cmd.Context(), args[0], args[1], id, force); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s/%s unlocked\n", args[0], args[1])
			return nil
		}),
	}
	unlock.Flags().BoolVar(&force, "force", false, "end the lock whoever holds it (needs state:force-unlock)")

	versions := &cobra.Command{
		Use:   "versions PROJECT WORKSPACE [N]",
		Short: "List a workspace's versions, or print version N's state",
		Args:  cobra.RangeArgs(2, 3),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if len(args) == 3 {
				n, err := strconv.ParseInt(args[2], 10, 64)
				if err != nil {
					return fmt.Errorf("version %q: not a number", args[2])
				}
				b, err := c.StateVersion(cmd.Context(), args[0], args[1], n)
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(b)
				return err
			}
			vs, err := c.StateVersions(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if vs == nil {
				vs = []client.StateVersion{}
			}
			return g.printList(vs, func(w io.Writer) error { return versionTable(w, vs) })
		}),
	}

	var restoreLock string
	restore := &cobra.Command{
		Use:   "restore PROJECT WORKSPACE N",
		Short: "Write version N back as the current state (with a new serial)",
		Args:  cobra.ExactArgs(3),
		RunE: withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			n, err := strconv.ParseInt(args[2], 10, 64)
			if err != nil {
				return fmt.Errorf("version %q: not a number", args[2])
			}
			v, err := c.StateRestore(cmd.Context(), args[0], args[1], n, restoreLock)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "restored version %d of %s/%s as version %d\n", n, args[0], args[1], v)
			return nil
		}),
	}
	restore.Flags().StringVar(&restoreLock, "lock-id", "", "the lock ID, when the workspace is locked")

	cmd.AddCommand(list, show, pull, push, lock, unlock, versions, restore, newStateDecryptCmd(g), newStateDeleteCmd(g))
	return cmd
}

func newLockID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func lockHolderText(l *client.LockStatus) string {
	if l == nil || !l.Locked {
		return ""
	}
	switch {
	case l.Info != nil:
		return fmt.Sprintf("%s (%s, ID %s)", l.Info.Who, l.Info.Operation, l.Info.ID)
	case l.PG != nil:
		from := l.PG.ClientAddr
		if from == "" {
			from = "local socket"
		}
		app := l.PG.ApplicationName
		if app == "" {
			app = "no application_name"
		}
		return fmt.Sprintf("pg client pid %d (%s) from %s, %s", l.PG.PID, l.PG.User, from, app)
	}
	return l.Kind
}

func versionTable(w io.Writer, vs []client.StateVersion) error {
	t := newTable(w, "N", "SERIAL", "LINEAGE", "SIZE", "SOURCE", "BY", "AT")
	for _, v := range vs {
		serial := ""
		if v.Serial != nil {
			serial = strconv.FormatInt(*v.Serial, 10)
		}
		t.row(strconv.FormatInt(v.N, 10), serial, v.Lineage, strconv.FormatInt(v.Size, 10), v.Source, v.CreatedBy, v.CreatedAt.UTC().Format(time.RFC3339))
	}
	return t.flush()
}
