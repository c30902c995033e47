// Package cli builds strata's command tree. Client commands talk to a server only through
// the public client package; serve and migrate are the two commands that reach the database
// (through internal/server).
//
// Every flag that configures the server has a STRATA_* environment twin; a flag given on the
// command line wins over the environment.
package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stratahq/strata/internal/server"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/pgembed"
)

// Version is set at build time (-ldflags "-X github.com/stratahq/strata/internal/cli.Version=…",
// as deploy/build-deb.sh does); otherwise it is taken from the build information Go records
// (a module version, or the VCS revision and time of a build in a checkout).
var Version = "dev"

func init() {
	if Version == "dev" {
		Version = buildVersion()
	}
}

// buildVersion describes a build without a stamped version: the module version when it was
// built as a dependency, else "dev+<revision>[-dirty] (<commit time>)".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	out := "dev+" + rev + dirty
	if at != "" {
		out += " (" + at + ")"
	}
	return out
}

// globals are the flags every client command shares.
type globals struct {
	server  string
	token   string
	dataDir string
	output  string
	caCert  string
	stdout  io.Writer
	stderr  io.Writer

	// context is --context; the rest is what resolve (context.go) settled from it.
	context     string
	flags       *pflag.FlagSet
	ctx         *namedContext
	serverFrom  string
	resolved    bool
	resolveErr  error
	resolveWarn bytes.Buffer      // the contexts file's warnings, shown by serverSettings
	annotations map[string]string // the root's, for explain
}

// Main runs the CLI with args and returns the process exit code. Errors are printed once.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", explain(err, root, cmd))
		return 1
	}
	return 0
}

// explain adds what to do to errors whose own words do not say it: a server that cannot
// be reached is the first thing a new user meets.
func explain(err error, root, cmd *cobra.Command) string {
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &ue) && errors.As(err, &oe) && (oe.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED)) {
		addr, _ := root.PersistentFlags().GetString("server")
		if from := root.Annotations[serverFromKey]; from != "" {
			return fmt.Sprintf("cannot reach a strata server at %s (%v), the server of %s.\n"+
				"Check that it runs, or fix the context with strata config set-context; --server URL or STRATA_SERVER override it.", server.Redact(addr), oe.Err, from)
		}
		return fmt.Sprintf("cannot reach a strata server at %s (%v).\n"+
			"Start one with `strata serve`, or point at yours with --server URL or STRATA_SERVER.", server.Redact(addr), oe.Err)
	}
	if words, ok := lockWords(err); ok {
		return words
	}
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		// The server speaks HTTP; a CLI user typed flags. The status adds nothing the
		// detail does not say (the exit code is 1 either way).
		if ce.Problem.Detail != "" {
			msg = strings.Replace(msg, ce.Error(), problemText(ce, cmd), 1)
		}
		for _, r := range apiTerms {
			msg = r.re.ReplaceAllString(msg, r.repl)
		}
	}
	return msg
}

// apiTerms are the server's ways of naming request parts that the CLI spells as flags.
var apiTerms = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`with \?cascade=true`), "with --cascade"},
	{regexp.MustCompile(`\?cascade=true`), "--cascade"},
	{regexp.MustCompile(`its objects are under /v1/orgs/\{org\}/resources/\S+`), "give --org ORG"},
	{regexp.MustCompile(`its objects are under /v1/resources/\S+`), "drop --org"},
	{regexp.MustCompile(`\?force=true`), "--force"},
	{regexp.MustCompile(`\(Authorization: Bearer <token>, or HTTP Basic auth with the token as password\)`),
		"(--token or STRATA_TOKEN; an unknown, revoked or expired token is refused)"},
	{regexp.MustCompile(`(?m)^  labelSelector: `), "  -l/--selector: "},
	{regexp.MustCompile(`name the org they belong to`), "give --org ORG, the org they belong to"},
	{regexp.MustCompile(`\bskipUnsupported\b`), "--skip-unsupported"},
}

// requireSubcommand makes a command that only groups others refuse what is not one of them
// (exit 1, with suggestions) instead of printing its help and exiting 0, which let a script
// carry on after `strata node lsit`. Without arguments it prints its help.
func requireSubcommand(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommand(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\n\nRun '%s --help' for its commands", msg, cmd.CommandPath())
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	resetEnvErrors()
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "strata",
		Short:         "strata keeps infrastructure control-plane data in PostgreSQL",
		Long:          "strata keeps labelled resources, layered configuration (pillars), Terraform/OpenTofu state and evolving kinds in PostgreSQL.\n\n'strata serve' runs the server; the other commands are its clients (server: --server, STRATA_SERVER or the context; token: --token, STRATA_TOKEN, the context's token file, or <data-dir>/admin-token; contexts: strata config).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.Annotations = map[string]string{}
	g.annotations = root.Annotations
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("STRATA_SERVER", client.DefaultServer), "strata server URL (env STRATA_SERVER)")
	hideDefault(pf, "server", server.Redact)
	pf.StringVar(&g.token, "token", os.Getenv("STRATA_TOKEN"), "API token (env STRATA_TOKEN; default: <data-dir>/admin-token)")
	hideDefault(pf, "token", maskAll)
	pf.StringVar(&g.dataDir, "data-dir", envOr("STRATA_DATA_DIR", pgembed.DefaultDataDir()), "data directory: embedded PostgreSQL and the admin-token file (env STRATA_DATA_DIR)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml (wide: object tables with more columns)")
	pf.StringVar(&g.caCert, "ca-cert", os.Getenv("STRATA_CA_CERT"), "PEM file of a CA to trust for an https --server (env STRATA_CA_CERT)")
	pf.StringVar(&g.context, "context", "", "the context (strata config get-contexts) whose server, token file and CA to use; default: the current context")
	g.flags = pf
	_ = root.RegisterFlagCompletionFunc("context", completeContexts)

	root.AddCommand(
		newServeCmd(g),
		newMigrateCmd(g),
		newBackupCmd(g),
		newDoctorCmd(g),
		newVersionCmd(g),
		newTokenCmd(g),
		newAuditCmd(g),
		newOrgCmd(g),
	)
	for _, add := range extraCommands {
		root.AddCommand(add(g))
	}
	addExamples(root)
	for _, c := range root.Commands() {
		requireSubcommand(c)
	}
	polishMessages(root)
	// One flag name per meaning, as kubectl: files are -f/--filename everywhere; --file,
	// which earlier releases took in some commands, still works.
	root.SetGlobalNormalizationFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "file" {
			name = "filename"
		}
		return pflag.NormalizedName(name)
	})
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		g.output = strings.ToLower(g.output)
		// Settle the server now, so what reads g.server before building a client sees the
		// context's; a bad contexts file matters only to commands that use the server
		// (serverSettings reports it there), never to serve, migrate or config.
		_ = g.resolve()
		switch g.output {
		case "table", "json", "yaml":
			return nil
		}
		return checkOutput(cmd, g.output)
	}
	return root
}

// extraCommands lets capability files register their command groups without editing newRoot.
var extraCommands []func(g *globals) *cobra.Command

// hideDefault masks how help shows the default of a secret-bearing flag (a token, a URL
// that may carry a password) whose default came from the environment: help texts end up in
// CI logs and support tickets, which is how such secrets leak. The flag's value is untouched.
func hideDefault(fs *pflag.FlagSet, name string, mask func(string) string) {
	if f := fs.Lookup(name); f != nil && f.DefValue != "" {
		f.DefValue = mask(f.DefValue)
	}
}

// maskAll hides a secret whole, its length included.
func maskAll(string) string { return "****" }

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// client builds an API client from the global flags, finding the token in --token,
// STRATA_TOKEN, the context's token file, or the data dir's admin-token file.
func (g *globals) client() (*client.Client, error) {
	if err := g.serverSettings(); err != nil {
		return nil, err
	}
	tok, err := g.contextToken()
	if err != nil {
		return nil, err
	}
	if tok == "" {
		path := filepath.Join(g.dataDir, "admin-token")
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			tok = strings.TrimSpace(string(b))
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("no API token: pass --token, set STRATA_TOKEN, use a context with a token file (strata config set-context), or point --data-dir/STRATA_DATA_DIR at the server's data dir (%s does not exist)", path)
		default:
			return nil, fmt.Errorf("read token file: %w", err)
		}
	}
	addr := g.server
	if !strings.Contains(addr, "://") {
		return nil, fmt.Errorf("--server %q: give a URL with its scheme, e.g. http://%s", server.Redact(addr), server.Redact(addr))
	}
	httpClient, err := g.httpClient()
	if err != nil {
		return nil, err
	}
	c, err := client.New(addr, tok, httpClient)
	if err != nil {
		return nil, err
	}
	c.UserAgent = "strata-cli/" + Version
	// The CLI reports a 503 at once, with its reason (docs/operations.md): a person or a
	// script decides whether to run the command again; Go programs get the client's retries.
	c.Retries = 0
	return c, nil
}

// httpClient trusts --ca-cert's certificates (besides the system's) when given, for servers
// with a private or self-signed certificate.
func (g *globals) httpClient() (*http.Client, error) {
	if g.caCert == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(g.caCert)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-cert %s: no PEM certificate found", g.caCert)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}, nil
}

// printList writes a list: with -o json or yaml as the API's list object, {"items": […]}
// (never a bare array, never null), so every list of every command has one shape; in table
// mode, the table.
func (g *globals) printList(items any, table func(w io.Writer) error) error {
	if v := reflect.ValueOf(items); v.Kind() == reflect.Slice && v.IsNil() {
		items = reflect.MakeSlice(v.Type(), 0, 0).Interface()
	}
	return g.print(struct {
		Items any `json:"items"`
	}{items}, table)
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
	case "table", "wide", "":
		return table(g.stdout)
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", g.output)
}

// writePrivate writes b to path readable by its owner only, also when the file exists
// already with a wider mode: what it writes may hold secrets (an exported Salt tree, a
// decrypted state, a sync stream).
func writePrivate(path string, b []byte) error {
	// Replace whatever is at path rather than open it: a link planted there is removed, its
	// target never written, and the new file is owner-only from its creation.
	f, err := createExclusive(path, true)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
