package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/server"
)

func init() { extraCommands = append(extraCommands, newKeysCmd) }

// newKeysCmd is `strata keys`: encryption keys for secret pillar categories and encrypted
// Terraform projects (docs/security.md).
func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Encryption keys: generate a key file, show what references each key, rotate"}
	gen := &cobra.Command{
		Use:   "generate FILE",
		Short: "Write a new random key-encryption key to FILE (mode 0600; refuses to overwrite)",
		Long: "Write a new key-encryption key (32 random bytes, base64) to FILE, readable by its owner only,\n" +
			"and print its key id. Give it to every replica with --encryption-key-file. Keep a copy apart\n" +
			"from the database's backups: a backup is readable only with the keys its values were sealed with.\n" +
			"Needs no server.",
		Example: "  strata keys generate /etc/strata/key-2026-11",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := server.GenerateKeyFile(args[0])
			if err != nil {
				return err
			}
			return g.print(map[string]string{"file": args[0], "id": id}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "key %s written to %s\n", id, args[0])
				return err
			})
		},
	}
	showStatus := func(st client.KeyStatus) error {
		return g.print(st, func(w io.Writer) error {
			tw := newTable(w, "KEY", "HELD", "VALUES", "STATE")
			seen := map[string]bool{}
			row := func(id string) {
				if seen[id] {
					return
				}
				seen[id] = true
				held, state := "no", "missing: start this replica with the key file holding "+id
				for _, k := range st.Keys {
					if k == id {
						held, state = "yes", "old: rotate, then retire"
					}
				}
				switch {
				case id == st.Primary:
					state = "primary (encrypts new values)"
				case held == "yes" && st.Sealed[id] == 0:
					state = "retirable (no value references it)"
				}
				tw.row(id, held, fmt.Sprint(st.Sealed[id]), state)
			}
			for _, id := range st.Keys {
				row(id)
			}
			for _, id := range st.Missing {
				row(id)
			}
			if err := tw.flush(); err != nil {
				return err
			}
			if len(st.Missing) > 0 {
				// Not a rotation's business: a rotation re-wraps with keys the replica holds.
				_, err := fmt.Fprintf(w, "missing: the database holds values sealed under key %s, which this replica lacks, so it is not ready and refuses secret reads and writes: "+
					"start it with the key file holding %s (--encryption-key-file FILE, or --encryption-key-command CMD), as every replica\n",
					strings.Join(st.Missing, ", "), strings.Join(st.Missing, ", "))
				return err
			}
			if st.Remaining > 0 {
				_, err := fmt.Fprintf(w, "%s not under the primary key: run `strata keys rotate`\n", countVerb(int(st.Remaining), "value", "is", "are"))
				return err
			}
			return nil
		})
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the keys the server holds and how many stored values each key wraps",
		Long: "Show the keys the answering replica holds (the primary encrypts new values), how many stored\n" +
			"values (secret pillar rows and their history, encrypted state versions) each key wraps, and\n" +
			"which keys may be retired: an old key is retirable once no value references it. A key the\n" +
			"database references that the replica lacks is \"missing\": start the replica with the key file\n" +
			"holding it (a rotation cannot help). It also tidies the database's record of referenced keys.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.Keys(cmd.Context())
			if err != nil {
				return err
			}
			return showStatus(st)
		},
	}
	var (
		batch int
		quiet bool
	)
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-wrap every stored value's data key with the primary key, in batches, while serving",
		Long: "Re-wrap the data key of every stored value that is not under the server's primary key (its\n" +
			"first key: the first --encryption-key-command's, else the first --encryption-key-file's), batch\n" +
			"by batch, each batch its own transaction and audit record\n" +
			"(keys.rotate). Values' own ciphertext is not touched, so a batch is cheap whatever the sizes.\n" +
			"Interrupted, it resumes where it stopped when run again. Run it once every replica holds the\n" +
			"new key first (docs/security.md); afterwards `strata keys status` shows the old key retirable.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.Keys(cmd.Context())
			if err != nil {
				return err
			}
			prog := g.newProgress(st.Remaining, "values re-wrapped", quiet)
			done := 0
			for {
				r, err := c.KeysRotate(cmd.Context(), batch)
				if err != nil {
					prog.abandon()
					return err
				}
				done += r.Rewrapped
				prog.set(int64(done), int64(done))
				if r.Rewrapped == 0 || r.Remaining == 0 {
					break
				}
			}
			prog.finish()
			st, err = c.Keys(cmd.Context())
			if err != nil {
				return err
			}
			if st.Remaining > 0 {
				if len(st.Missing) > 0 {
					return fmt.Errorf("%d values are still under other keys, some under key %s, which this replica lacks: start it with the key file holding it (--encryption-key-file), then run `strata keys rotate` again", st.Remaining, strings.Join(st.Missing, ", "))
				}
				return fmt.Errorf("%d values are still under other keys (written by a replica meanwhile); run `strata keys rotate` again", st.Remaining)
			}
			fmt.Fprintf(g.stderr, "%s re-wrapped with key %s\n", count(int(done), "value"), st.Primary)
			return showStatus(st)
		},
	}
	rotate.Flags().IntVar(&batch, "batch", 1000, "values re-wrapped per transaction")
	rotate.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress")
	cmd.AddCommand(gen, status, rotate)
	return cmd
}
