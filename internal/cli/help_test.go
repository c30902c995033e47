package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestHelpHidesSecrets is finding 10 of issue 15: with STRATA_DATABASE_URL or STRATA_TOKEN
// set, help printed the database password and the token as flag defaults. Every secret
// environment twin is set and the help of every command is searched for them; the masked
// defaults are still shown, so help says that a value is set and where it points. Seen
// failing with the masking removed. Not parallel: it sets the process environment.
func TestHelpHidesSecrets(t *testing.T) {
	secrets := map[string]string{
		"STRATA_TOKEN":                "strata_tokenSECRETaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"STRATA_BOOTSTRAP_TOKEN":      "strata_bootSECRETbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
		"STRATA_DATABASE_URL":         "postgres://strata:dbSECRET@db.example:5432/strata?sslmode=require",
		"STRATA_SESSION_DATABASE_URL": "host=db.example user=strata password='sessSECRET x' dbname=strata",
		"STRATA_SERVER":               "https://admin:srvSECRET@strata.example:8443",
		// A key command may carry a KMS token on its command line (issue 28).
		"STRATA_ENCRYPTION_KEY_COMMAND": "vault kv get -field=key -token=kmsSECRET secret/strata",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root, nil)
	require.Greater(t, len(paths), 30, "every command is walked")

	shown := map[string]bool{}
	for _, path := range paths {
		for _, args := range [][]string{append(append([]string(nil), path...), "--help"), append([]string{"help"}, path...)} {
			var out, errb bytes.Buffer
			code := Main(context.Background(), args, &out, &errb)
			require.Equal(t, 0, code, "%v: %s", args, errb.String())
			text := out.String() + errb.String()
			require.NotEmpty(t, out.String(), args)
			require.NotContains(t, text, "SECRET", "strata %s shows a secret", strings.Join(args, " "))
			for _, masked := range []string{
				`--token string ` /* the flag is listed */, `(default "****")`,
				`postgres://strata:****@db.example:5432/strata?sslmode=require`,
				`host=db.example user=strata password=**** dbname=strata`,
				`https://admin:****@strata.example:8443`,
			} {
				if strings.Contains(text, masked) {
					shown[masked] = true
				}
			}
		}
	}
	// The control: the masked forms are what help shows, so the search above looked where
	// the secrets would have been.
	require.Len(t, shown, 5, "masked defaults seen: %v", shown)
}

// TestServeHelpPlaceholders (issue 28): pflag takes a usage's first back-quoted word as the
// flag's placeholder, so --encryption-key-file showed as "--encryption-key-file strata keys
// generate FILE". Every serve flag's placeholder is a single word.
func TestServeHelpPlaceholders(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"serve", "--help"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "--encryption-key-file FILE ")
	require.Contains(t, out.String(), "--encryption-key-command COMMAND ")
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(f[0], "--") && f[1] != "" && strings.ToLower(f[1]) == f[1] && !strings.ContainsAny(f[1], "0123456789") {
			// "--flag type  usage": the second word is a one-word type or placeholder, never
			// part of a sentence.
			require.Contains(t, []string{"string", "int", "int64", "duration", "stringArray", "bool", "strings"}, f[1], "placeholder of %s", f[0])
		}
	}
}
