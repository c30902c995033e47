package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/server"
)

// Contexts let one CLI speak to several installations (kubeconfig is the model): a named
// context is a server URL with the paths of its token file and CA certificate, kept in
// $XDG_CONFIG_HOME/strata/config.yaml. The file holds paths, never tokens, so it can be
// shown, diffed and backed up without leaking a credential.

func init() {
	extraCommands = append(extraCommands, newConfigCmd)
}

// contextConfig is the contexts file.
type contextConfig struct {
	CurrentContext string         `yaml:"current-context,omitempty"`
	Contexts       []namedContext `yaml:"contexts"`
}

// namedContext is one installation: where it is and where its token and CA are kept.
type namedContext struct {
	Name      string `yaml:"name" json:"name"`
	Server    string `yaml:"server" json:"server"`
	TokenFile string `yaml:"token-file,omitempty" json:"tokenFile,omitempty"`
	CACert    string `yaml:"ca-cert,omitempty" json:"caCert,omitempty"`
}

// contextFile is where contexts are kept: $XDG_CONFIG_HOME/strata/config.yaml, or
// ~/.config/strata/config.yaml when XDG_CONFIG_HOME is unset or not absolute (as the XDG
// base directory specification says to ignore a relative one).
func contextFile() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "strata", "config.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("contexts file: no home directory (%v): set XDG_CONFIG_HOME", err)
	}
	return filepath.Join(home, ".config", "strata", "config.yaml"), nil
}

// loadContexts reads the contexts file; a missing file is an empty configuration. A file
// that others may write is refused: whoever can edit it decides which server receives the
// token files it names. One that others may read is used with a warning, since it names
// servers and token paths, though no secret.
func loadContexts(warn io.Writer) (*contextConfig, string, error) {
	path, err := contextFile()
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &contextConfig{}, path, nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("contexts file: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		mode := fi.Mode().Perm()
		if mode&0o022 != 0 {
			return nil, path, fmt.Errorf("%s is writable by others (mode %04o): whoever can write it decides which server gets your tokens; fix it with chmod 600 %s", path, mode, path)
		}
		if mode&0o044 != 0 && warn != nil {
			fmt.Fprintf(warn, "warning: %s is readable by others (mode %04o); it holds no token but names your servers and token files: chmod 600 %s\n", path, mode, path)
		}
	}
	var cfg contextConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		if strings.Contains(msg, `field token `) {
			msg += " (the file names a token-file, never the token itself)"
		}
		return nil, path, fmt.Errorf("%s: %s", path, msg)
	}
	return &cfg, path, nil
}

// save writes the contexts file owner-only, replacing it atomically so an interrupted
// write never leaves a half file, and tightening the mode of one that was wider.
func (cfg *contextConfig) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("# strata contexts: servers and the paths of their token files (never tokens).\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	b := buf.Bytes()
	f, err := os.CreateTemp(filepath.Dir(path), ".config.yaml-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func (cfg *contextConfig) find(name string) (int, bool) {
	for i, c := range cfg.Contexts {
		if c.Name == name {
			return i, true
		}
	}
	return -1, false
}

func (cfg *contextConfig) names() string {
	var n []string
	for _, c := range cfg.Contexts {
		n = append(n, c.Name)
	}
	if len(n) == 0 {
		return "there are none; add one with strata config set-context NAME --server URL"
	}
	return "contexts: " + strings.Join(n, ", ")
}

// resolve settles the server, CA certificate and context each command uses, once:
// a flag wins, then the environment (STRATA_SERVER, STRATA_TOKEN, STRATA_CA_CERT), then the
// context (--context, else the file's current context), then the built-in defaults (the
// local server and <data-dir>/admin-token). Without a contexts file or --context it changes
// nothing.
func (g *globals) resolve() error {
	if g.resolved {
		return g.resolveErr
	}
	g.resolved = true
	g.resolveErr = g.resolveContext()
	return g.resolveErr
}

// serverSettings is resolve for a command that uses the server: it reports what resolve
// found wrong with the contexts file, and its warnings, once.
func (g *globals) serverSettings() error {
	err := g.resolve()
	if g.resolveWarn.Len() > 0 {
		_, _ = g.resolveWarn.WriteTo(g.stderr)
	}
	return err
}

// resolveContext records where the server came from (for messages), and lets the context in
// effect fill the server and CA that neither a flag nor the environment set; the token is
// read later, by contextToken, and only for a command that sends one.
func (g *globals) resolveContext() error {
	g.serverFrom = "--server"
	if !g.flags.Changed("server") {
		g.serverFrom = "STRATA_SERVER"
		if os.Getenv("STRATA_SERVER") == "" {
			g.serverFrom = "the default"
		}
	}
	cfg, path, err := loadContexts(&g.resolveWarn)
	if err != nil {
		return err
	}
	name, how := g.context, "--context"
	if name == "" {
		name, how = cfg.CurrentContext, "the current context"
	}
	if name == "" {
		return nil
	}
	i, ok := cfg.find(name)
	if !ok {
		return fmt.Errorf("%s %q is not in %s (%s)", how, name, path, cfg.names())
	}
	ctx := cfg.Contexts[i]
	g.ctx = &ctx
	if g.serverFrom == "the default" {
		g.server, g.serverFrom = ctx.Server, fmt.Sprintf("context %q", ctx.Name)
		if g.annotations != nil {
			g.annotations[serverFromKey] = g.serverFrom
		}
	}
	if !g.flags.Changed("ca-cert") && os.Getenv("STRATA_CA_CERT") == "" && ctx.CACert != "" {
		g.caCert = ctx.CACert
	}
	return nil
}

// serverFromKey is the root command's annotation that tells explain which context named an
// unreachable server, so its advice points at the context rather than only at --server.
const serverFromKey = "strata/server-from"

// contextToken returns the token of the context in effect, read from its token file, when
// neither --token nor STRATA_TOKEN gave one. A context's token goes only to its own server:
// with --server or STRATA_SERVER pointing elsewhere it is refused rather than sent to a
// server it was not made for.
func (g *globals) contextToken() (string, error) {
	if g.token != "" || g.ctx == nil || g.ctx.TokenFile == "" {
		return g.token, nil
	}
	if strings.TrimRight(g.server, "/") != strings.TrimRight(g.ctx.Server, "/") {
		return "", fmt.Errorf("the server is %s (from %s), not context %q's %s: its token file is only sent to its own server; give that server's token with --token or STRATA_TOKEN, or drop %s to use the context",
			server.Redact(g.server), g.serverFrom, g.ctx.Name, server.Redact(g.ctx.Server), g.serverFrom)
	}
	b, err := os.ReadFile(g.ctx.TokenFile)
	if err != nil {
		return "", fmt.Errorf("context %q: token file: %w", g.ctx.Name, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("context %q: token file %s is empty", g.ctx.Name, g.ctx.TokenFile)
	}
	return tok, nil
}

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage contexts: named servers with their token files, for more than one installation",
		Long: `A context names an installation: its server URL, the file holding its token and the CA
certificate to trust. Contexts are kept in $XDG_CONFIG_HOME/strata/config.yaml
(~/.config/strata/config.yaml), owner-only, and hold token file paths, never tokens.

Every command uses --context NAME, else the current context (use-context). A flag or an
environment variable still wins over the context: --server/STRATA_SERVER,
--token/STRATA_TOKEN, --ca-cert/STRATA_CA_CERT; without any of them the local defaults
apply (` + client.DefaultServer + ` and <data-dir>/admin-token).`,
	}

	var serverURL, tokenFile, caCert string
	set := &cobra.Command{
		Use:   "set-context NAME --server URL [--token-file FILE] [--ca-cert FILE]",
		Short: "Create a context, or change the fields given of an existing one",
		Example: `  strata config set-context prod --server https://strata.example.com --token-file ~/.strata/prod-token
  strata config set-context lab --server http://lab:8080 --token-file lab-token --ca-cert lab-ca.pem
  strata config set-context prod --token-file ~/.strata/new-token    # change one field`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" || strings.ContainsAny(name, " \t\n") {
				return fmt.Errorf("context name %q: give a name without spaces", name)
			}
			cfg, path, err := loadContexts(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			i, exists := cfg.find(name)
			var c namedContext
			if exists {
				c = cfg.Contexts[i]
			} else {
				c.Name = name
				if !cmd.Flags().Changed("server") {
					return fmt.Errorf("context %q is new: give its --server URL", name)
				}
			}
			if cmd.Flags().Changed("server") {
				if !strings.Contains(serverURL, "://") {
					return fmt.Errorf("--server %q: give a URL with its scheme, e.g. https://%s", serverURL, serverURL)
				}
				c.Server = serverURL
			}
			for _, f := range []struct {
				flag, val string
				dst       *string
			}{{"token-file", tokenFile, &c.TokenFile}, {"ca-cert", caCert, &c.CACert}} {
				if !cmd.Flags().Changed(f.flag) {
					continue
				}
				if f.val == "" { // --token-file "" removes the field
					*f.dst = ""
					continue
				}
				abs, err := filepath.Abs(f.val)
				if err != nil {
					return fmt.Errorf("--%s: %w", f.flag, err)
				}
				if _, err := os.Stat(abs); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: --%s %s: %v (the context keeps the path; create the file before using it)\n", f.flag, abs, errors.Unwrap(err))
				}
				*f.dst = abs
			}
			if exists {
				cfg.Contexts[i] = c
			} else {
				cfg.Contexts = append(cfg.Contexts, c)
			}
			if err := cfg.save(path); err != nil {
				return err
			}
			verb := "created"
			if exists {
				verb = "updated"
			}
			fmt.Fprintf(g.stdout, "context %q %s in %s\n", name, verb, path)
			if cfg.CurrentContext != name {
				fmt.Fprintf(g.stdout, "use it with --context %s, or make it the current one: strata config use-context %s\n", name, name)
			}
			return nil
		},
	}
	set.Flags().StringVar(&serverURL, "server", "", "the server URL of this context")
	set.Flags().StringVar(&tokenFile, "token-file", "", "file holding this context's token (its path is kept, never the token; \"\" removes it)")
	set.Flags().StringVar(&caCert, "ca-cert", "", "PEM file of a CA to trust for this context's https server (\"\" removes it)")

	use := &cobra.Command{
		Use:     "use-context NAME",
		Short:   "Make a context the current one, used when no --context is given",
		Example: "  strata config use-context prod",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := loadContexts(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if _, ok := cfg.find(args[0]); !ok {
				return fmt.Errorf("context %q is not in %s (%s)", args[0], path, cfg.names())
			}
			cfg.CurrentContext = args[0]
			if err := cfg.save(path); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "switched to context %q\n", args[0])
			return nil
		},
	}

	get := &cobra.Command{
		Use:     "get-contexts",
		Short:   "List the contexts; the current one is marked with *",
		Example: "  strata config get-contexts\n  strata config get-contexts -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadContexts(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			type row struct {
				namedContext
				Current bool `json:"current"`
			}
			rows := make([]row, 0, len(cfg.Contexts))
			for _, c := range cfg.Contexts {
				rows = append(rows, row{c, c.Name == cfg.CurrentContext})
			}
			sort.SliceStable(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
			return g.printList(rows, func(w io.Writer) error {
				t := newTable(w, "CURRENT", "NAME", "SERVER", "TOKEN-FILE", "CA-CERT")
				for _, r := range rows {
					mark := ""
					if r.Current {
						mark = "*"
					}
					t.row(mark, r.Name, server.Redact(r.Server), orDash(r.TokenFile), orDash(r.CACert))
				}
				return t.flush()
			})
		},
	}

	current := &cobra.Command{
		Use:   "current-context",
		Short: "Print the name of the current context",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := loadContexts(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return fmt.Errorf("no current context in %s: choose one with strata config use-context NAME", path)
			}
			fmt.Fprintln(g.stdout, cfg.CurrentContext)
			return nil
		},
	}

	del := &cobra.Command{
		Use:     "delete-context NAME",
		Short:   "Remove a context (its token file is left alone)",
		Example: "  strata config delete-context lab",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, path, err := loadContexts(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			i, ok := cfg.find(args[0])
			if !ok {
				return fmt.Errorf("context %q is not in %s (%s)", args[0], path, cfg.names())
			}
			cfg.Contexts = append(cfg.Contexts[:i], cfg.Contexts[i+1:]...)
			wasCurrent := cfg.CurrentContext == args[0]
			if wasCurrent {
				cfg.CurrentContext = ""
			}
			if err := cfg.save(path); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "context %q deleted\n", args[0])
			if wasCurrent {
				fmt.Fprintln(g.stdout, "it was the current context: there is none now (choose one with strata config use-context NAME)")
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{set, use, del} {
		c.ValidArgsFunction = completeContexts
	}
	cmd.AddCommand(set, use, get, current, del)
	return cmd
}

// completeContexts offers the contexts' names to shell completion (use-context,
// delete-context, set-context and --context).
func completeContexts(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	cfg, _, err := loadContexts(nil)
	if err != nil || len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(cfg.Contexts))
	for _, c := range cfg.Contexts {
		names = append(names, c.Name+"\t"+server.Redact(c.Server))
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
