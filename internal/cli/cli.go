// Package cli builds strata's command tree. Client commands talk to a server only through
// the public client package; serve and migrate are the two commands that reach the database
// (through internal/server).
//
// Every flag that configures the server has a STRATA_* environment twin; a flag given on the
// command line wins over the environment.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgembed"
)

// Version is set at build time (-ldflags "-X github.com/stratahq/strata/internal/cli.Version=…").
var Version = "dev"

// globals are the flags every client command shares.
type globals struct {
	server  string
	token   string
	dataDir string
	output  string
	stdout  io.Writer
	stderr  io.Writer
}

// Main runs the CLI with args and returns the process exit code. Errors are printed once.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	envErrors = nil
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "strata",
		Short:         "strata keeps infrastructure control-plane data in PostgreSQL",
		Long:          "strata keeps labelled resources, layered configuration (pillars), Terraform/OpenTofu state and evolving kinds in PostgreSQL.\n\n'strata serve' runs the server; the other commands are its clients (server: --server or STRATA_SERVER; token: --token, STRATA_TOKEN, or <data-dir>/admin-token).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("STRATA_SERVER", client.DefaultServer), "strata server URL (env STRATA_SERVER)")
	pf.StringVar(&g.token, "token", os.Getenv("STRATA_TOKEN"), "API token (env STRATA_TOKEN; default: <data-dir>/admin-token)")
	pf.StringVar(&g.dataDir, "data-dir", envOr("STRATA_DATA_DIR", pgembed.DefaultDataDir()), "data directory: embedded PostgreSQL and the admin-token file (env STRATA_DATA_DIR)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")

	root.AddCommand(
		newServeCmd(g),
		newMigrateCmd(g),
		newVersionCmd(g),
		newTokenCmd(g),
		newAuditCmd(g),
		newOrgCmd(g),
	)
	for _, add := range extraCommands {
		root.AddCommand(add(g))
	}
	return root
}

// extraCommands lets capability files register their command groups without editing newRoot.
var extraCommands []func(g *globals) *cobra.Command

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// client builds an API client from the global flags, finding the token in --token,
// STRATA_TOKEN, or the data dir's admin-token file.
func (g *globals) client() (*client.Client, error) {
	tok := g.token
	if tok == "" {
		b, err := os.ReadFile(filepath.Join(g.dataDir, "admin-token"))
		switch {
		case err == nil:
			tok = strings.TrimSpace(string(b))
		case errors.Is(err, os.ErrNotExist):
			// No token: the server will answer 401 with a message saying how to authenticate.
		default:
			return nil, fmt.Errorf("read token file: %w", err)
		}
	}
	c, err := client.New(g.server, tok, nil)
	if err != nil {
		return nil, err
	}
	c.UserAgent = "strata-cli/" + Version
	return c, nil
}

// print writes v as JSON or YAML, or calls table for the table format.
func (g *globals) print(v any, table func(w io.Writer) error) error {
	switch g.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(g.stdout, string(b))
		return err
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		y, err := jsonToYAML(b)
		if err != nil {
			return err
		}
		_, err = g.stdout.Write(y)
		return err
	case "table", "":
		return table(g.stdout)
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", g.output)
}
