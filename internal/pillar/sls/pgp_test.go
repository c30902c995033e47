package sls

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// armored is a made-up armored message: the reader never decrypts, it only matches text.
const armored = "-----BEGIN PGP MESSAGE-----\n\nhQEMA0x1ZZZZZZZZAQf/abcdef\n=AbCd\n-----END PGP MESSAGE-----"

// indent puts n spaces before every non-empty line of s, as a YAML block scalar holds it.
func indent(s string, n int) string {
	var out []byte
	start := true
	for i := 0; i < len(s); i++ {
		if start && s[i] != '\n' {
			for range n {
				out = append(out, ' ')
			}
		}
		out = append(out, s[i])
		start = s[i] == '\n'
	}
	return string(out)
}

// TestFindPGPBlocks: a block scalar's message comes out without its indentation, CRLF files
// and trailing spaces give the same text, and each block is at its BEGIN line.
func TestFindPGPBlocks(t *testing.T) {
	t.Parallel()
	src := "a: 1\npassword: |\n" + indent(armored, 4) + "\nother:\n  nested: |\n" + indent(armored, 6) + "   \n"
	blocks := FindPGPBlocks([]byte(src))
	require.Equal(t, []PGPBlock{{Line: 3, Armored: armored}, {Line: 10, Armored: armored}}, blocks)

	crlf := []byte("k: |\r\n" + indent("-----BEGIN PGP MESSAGE-----  \r\n\r\nhQEMA0x1ZZZZZZZZAQf/abcdef\r\n=AbCd\r\n-----END PGP MESSAGE-----\r\n", 2))
	require.Equal(t, []PGPBlock{{Line: 1 + 1, Armored: armored}}, FindPGPBlocks(crlf))

	oneLine := []byte(`k: "x -----BEGIN PGP MESSAGE----- abc -----END PGP MESSAGE----- y"` + "\n")
	require.Equal(t, []PGPBlock{{Line: 1, Armored: "-----BEGIN PGP MESSAGE----- abc -----END PGP MESSAGE-----"}}, FindPGPBlocks(oneLine))

	require.Empty(t, FindPGPBlocks([]byte("a: b\n")))
	unterminated := FindPGPBlocks([]byte("k: |\n  -----BEGIN PGP MESSAGE-----\n  abc\n"))
	require.Equal(t, []PGPBlock{{Line: 2, Armored: "-----BEGIN PGP MESSAGE-----\nabc"}}, unterminated)
}

// TestReadDecrypted (issue 22): with the CLI's decryptions a PGP block is no longer
// refused; its value becomes the plaintext as Salt's gpg renderer gives it (newlines ending
// the string removed), rows needing the file (also through include:) are marked Secret,
// and plaintext never reaches a reason. Without the map the same tree is refused at the
// block's file and line, as before.
func TestReadDecrypted(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"top.sls":   "base:\n  '*':\n    - db\n    - app\n    - plain\n",
		"db.sls":    "#!yaml|gpg\npostgres:\n  port: 5432\n  password: |\n" + indent(armored, 4) + "\n  note: |\n    prefix:" + indent(armored, 4)[4:] + "\n    suffix\n",
		"app.sls":   "include:\n  - db\napp:\n  name: shop\n",
		"plain.sls": "motd: hello\n",
	}
	plain := map[string]string{armored: "s3cr3t: 'p@ss'\n\n"}

	plan := readTree(t, files, Options{Decrypted: plain})
	require.Empty(t, plan.Unsupported)
	db := rowData(t, plan, "db")
	require.Equal(t, "s3cr3t: 'p@ss'", db["postgres"].(map[string]any)["password"], "the plaintext, newlines ending it removed, never parsed as YAML")
	// Salt replaces every message inside a string where it stands, then removes the
	// newlines ending the whole string.
	require.Equal(t, "prefix:s3cr3t: 'p@ss'\n\n\nsuffix", db["postgres"].(map[string]any)["note"])
	secret := map[string]bool{}
	for _, r := range plan.Rows {
		secret[r.Category] = r.Secret
	}
	require.Equal(t, map[string]bool{"db": true, "app": true, "plain": false}, secret, "app includes db")

	// A map from a client that normalizes differently (CRLF, no trimming) still matches.
	crlf := map[string]string{"\n" + strings.ReplaceAll(armored, "\n", "\r\n") + " \r\n": "x"}
	require.Empty(t, readTree(t, files, Options{Decrypted: crlf}).Unsupported)

	// Without the map: refused at the BEGIN line, the file's rows left out, as before.
	plan = readTree(t, files, Options{})
	require.Equal(t, []string{
		"db.sls:5: " + pgpRefused,
		"db.sls:11: " + pgpRefused,
	}, reasons(plan))
	for _, r := range plan.Rows {
		require.NotContains(t, []string{"db", "app"}, r.Category)
	}

	// A map that holds another message: this one is still refused, at its line.
	plan = readTree(t, files, Options{Decrypted: map[string]string{"-----BEGIN PGP MESSAGE-----\nother\n-----END PGP MESSAGE-----": "x"}})
	require.Equal(t, []string{"db.sls:5: " + pgpRefused, "db.sls:11: " + pgpRefused}, reasons(plan))

	// A folded scalar joins the armor's lines: the CLI decrypted the block as written, but
	// the value is not that text, so it is refused with the reason and the plaintext is not
	// leaked into any message.
	folded := map[string]string{
		"top.sls": "base:\n  '*':\n    - db\n",
		"db.sls":  "password: >\n" + indent(armored, 2) + "\n",
	}
	plan = readTree(t, folded, Options{Decrypted: plain})
	require.Len(t, plan.Unsupported, 1)
	require.Equal(t, 2, plan.Unsupported[0].Line)
	require.Contains(t, plan.Unsupported[0].Reason, "literal block scalar")
	require.NotContains(t, plan.Unsupported[0].Reason, "p@ss")
	require.Empty(t, plan.Rows)

	// Keys are not decrypted (Salt's renderer decrypts values only): the key keeps the
	// armor, and nothing is marked secret.
	keyed := map[string]string{
		"top.sls": "base:\n  '*':\n    - k\n",
		"k.sls":   "? |\n" + indent(armored, 2) + "\n: v\n",
	}
	plan = readTree(t, keyed, Options{Decrypted: plain})
	require.Empty(t, plan.Unsupported)
	require.Equal(t, map[string]any{armored + "\n": "v"}, rowData(t, plan, "k"))
	require.False(t, plan.Rows[0].Secret)
}
