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
