package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/client"
)

// count spells n things in English: "1 object", "3 objects", "0 objects". noun is the
// singular; its plural adds "s" (every noun the CLI counts does).
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// countVerb is count with its verb agreeing: "1 value is", "3 values are".
func countVerb(n int, noun, one, many string) string {
	if n == 1 {
		return count(n, noun) + " " + one
	}
	return count(n, noun) + " " + many
}

// polishMessages makes the command tree answer mistakes with the way out: an unknown flag
// gets the nearest flag names of its command, and a file given as an argument to a command
// that takes it with -f gets the command line that works.
func polishMessages(root *cobra.Command) {
	root.SetFlagErrorFunc(suggestFlag)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("filename") != nil && c.Runnable() {
			suggestDashF(c)
		}
	}
	walk(root)
}

// unknownFlag matches pflag's "unknown flag: --lable" and "unknown shorthand flag: 'x' in -x".
var unknownFlag = regexp.MustCompile(`^unknown flag: --([^\s=]+)|^unknown shorthand flag: '(.)' in`)

// suggestFlag adds to an unknown flag the flags of the command within two edits of it, or
// starting with it ("--lable" → "--label", "--sel" → "--selector"). pflag names the flag but
// not what was meant; cobra suggests commands (SuggestionsMinimumDistance), never flags.
func suggestFlag(cmd *cobra.Command, err error) error {
	m := unknownFlag.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return err
	}
	typed := m[1]
	var names []string
	seen := map[string]bool{}
	add := func(f *pflag.Flag) {
		if !f.Hidden && !seen[f.Name] {
			seen[f.Name] = true
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	// A prefix is what was meant more often than a near name ("--sel" is --selector, not
	// --help); a near name must be nearer than half the typed one.
	var near []string
	for _, n := range names {
		if len(typed) >= 2 && strings.HasPrefix(n, typed) {
			near = append(near, n)
		}
	}
	if len(near) == 0 {
		for _, n := range nearest(typed, names) {
			if 2*editDistance(strings.ToLower(typed), strings.ToLower(n)) < len(typed) {
				near = append(near, n)
			}
		}
	}
	if len(near) == 0 {
		return fmt.Errorf("%w (`%s --help` lists its flags)", err, cmd.CommandPath())
	}
	for i, n := range near {
		near[i] = "--" + n
	}
	return fmt.Errorf("%w; did you mean %s?", err, strings.Join(near, " or "))
}

// fileLike reports whether an argument is, by all signs, a file: "-", an existing regular
// file, or a name with one of the extensions the CLI reads.
func fileLike(arg string) bool {
	if arg == "-" {
		return true
	}
	if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
		return true
	}
	switch strings.ToLower(filepath.Ext(arg)) {
	case ".yaml", ".yml", ".json", ".ndjson", ".jsonl", ".sls", ".tfstate":
		return true
	}
	return false
}

// suggestDashF wraps the argument check of a command that takes its file with -f: when the
// arguments are refused and the last one is a file without which they would be accepted,
// the error is the command line that works (`kind apply database.yaml` → "did you mean
// `strata kind apply -f database.yaml`?").
func suggestDashF(c *cobra.Command) {
	check := c.Args
	if check == nil {
		check = cobra.ArbitraryArgs
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil || len(args) == 0 || cmd.Flags().Changed("filename") {
			return err
		}
		file := args[len(args)-1]
		rest := args[:len(args)-1]
		if !fileLike(file) || check(cmd, rest) != nil {
			return err
		}
		line := append([]string{cmd.CommandPath()}, rest...)
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if f.Value.Type() == "bool" {
				line = append(line, "--"+f.Name)
				return
			}
			line = append(line, "--"+f.Name, f.Value.String())
		})
		line = append(line, "-f", file)
		return fmt.Errorf("%s takes its file with -f: did you mean `%s`?", cmd.CommandPath(), strings.Join(line, " "))
	}
}

// problemText is a refusal of the server as the CLI prints it: each sentence once (the detail
// and an entry of errors saying the same are one line), the fields the command set from flags
// named as those flags (cmd is the command that ran; nil when unknown).
func problemText(ce *client.Error, cmd *cobra.Command) string {
	field, headline, rest := ce.Problem.Lines()
	if name := flagOfField(field, cmd); name != "" {
		field = name
	}
	for _, r := range apiTerms {
		headline = r.re.ReplaceAllString(headline, r.repl)
	}
	msg := headline
	if field != "" && !strings.Contains(headline, field) {
		msg = field + ": " + headline
	}
	for _, f := range rest {
		name := f.Field
		if n := flagOfField(f.Field, cmd); n != "" {
			name = n
		}
		if name == "" {
			msg += "\n  " + f.Message
			continue
		}
		msg += "\n  " + name + ": " + f.Message
	}
	return msg
}

// fieldFlags are the query parameters the CLI sets from a flag, whatever the command.
var fieldFlags = map[string]string{
	"labelSelector":   "-l/--selector",
	"org":             "--org",
	"skipUnsupported": "--skip-unsupported",
	"dryRun":          "--dry-run",
	"cascade":         "--cascade",
	"force":           "--force",
}

// flagOfField names the flag the command set a request's field from, or "". A query parameter
// has its flag everywhere; a body member (a JSON pointer) is named by a flag the user gave
// whose name is one of the pointer's segments, in the singular or as a suffix (/spec/org is
// --org, /scopes/0 is --scope, /metadata/labels/x is --label, /spec/selector is
// --node-selector). Only flags given on this command line count: a member written in a file
// (apply -f) keeps its pointer.
func flagOfField(field string, cmd *cobra.Command) string {
	if f, ok := fieldFlags[field]; ok {
		return f
	}
	if cmd == nil || !strings.HasPrefix(field, "/") {
		return ""
	}
	segs := strings.Split(field[1:], "/")
	for i := len(segs) - 1; i >= 0; i-- {
		seg := segs[i]
		if seg == "" || strings.Trim(seg, "0123456789") == "" {
			continue
		}
		var found string
		cmd.Flags().Visit(func(f *pflag.Flag) {
			if found == "" && (f.Name == seg || f.Name+"s" == seg || strings.HasSuffix(f.Name, "-"+seg)) {
				found = "--" + f.Name
			}
		})
		if found != "" {
			return found
		}
	}
	return ""
}
