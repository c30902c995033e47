package sls

import (
	"regexp"
	"strings"

	"github.com/stratahq/strata/api"
)

const (
	pgpBegin = api.PGPBegin
	pgpEnd   = api.PGPEnd
)

// pgpMessage is what Salt's gpg renderer (salt/renderers/gpg.py, GPG_CIPHERTEXT) decrypts
// inside a string value: each shortest span from a BEGIN to an END marker, newlines
// included.
var pgpMessage = regexp.MustCompile(`(?s)` + regexp.QuoteMeta(pgpBegin) + `.*?` + regexp.QuoteMeta(pgpEnd))

// PGPBlock is an armored PGP message found in a file's text (api.PGPBlock).
type PGPBlock = api.PGPBlock

// FindPGPBlocks is api.FindPGPBlocks: the CLI and this reader find messages alike.
func FindPGPBlocks(src []byte) []PGPBlock { return api.FindPGPBlocks(src) }

// NormalizeArmor is api.NormalizeArmor.
func NormalizeArmor(s string) string { return api.NormalizeArmor(s) }

// normalizeDecrypted keys a decrypted map by NormalizeArmor, so that a client normalizing
// differently (or not at all) still matches.
func normalizeDecrypted(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[NormalizeArmor(k)] = v
	}
	return out
}

// filePos is a line of a file.
type filePos struct {
	file string
	line int
}

// pgpRefused is the reason a PGP block nobody decrypted is reported with.
const pgpRefused = "a PGP-encrypted value: Salt's gpg renderer or decrypt_pillar serves the plaintext, strata would serve the ciphertext; put the secret into strata yourself"

// decryptValue is Salt's gpg renderer applied to one string value (_decrypt_ciphertexts):
// every PGP message in it is replaced by its plaintext from Options.Decrypted and, when
// one was, newlines ending the result are removed (Salt does so because a block scalar
// ends with one). A message the map lacks is reported at the line of its BEGIN marker,
// found from the value's line on in the file's text; the value is then left as it is and
// the file refused. It returns the value and whether it held a decrypted secret.
func (r *reader) decryptValue(file string, lines []string, line int, s string, report func(int, string)) (string, bool) {
	if !strings.Contains(s, pgpBegin) {
		return s, false
	}
	from := max(line-1, 0)
	atBegin := func() int { // the next BEGIN marker at or after the value's line
		for i := from; i < len(lines); i++ {
			if strings.Contains(lines[i], pgpBegin) {
				from = i + 1
				return i + 1
			}
		}
		return line
	}
	missing, n := false, 0
	out := pgpMessage.ReplaceAllStringFunc(s, func(m string) string {
		at := atBegin()
		n++
		plain, ok := r.decrypted[NormalizeArmor(m)]
		if !ok {
			missing = true
			if r.rawDecrypted[filePos{file, at}] {
				// The CLI decrypted the block as the file's text shows it, but YAML reads
				// the value differently (a folded or quoted scalar joins its lines).
				report(at, "a PGP-encrypted value that YAML does not read as it is written (a folded or quoted scalar?), so its decryption does not apply: write it as a literal block scalar (key: |)")
			} else {
				report(at, pgpRefused)
			}
			return m
		}
		return plain
	})
	if missing || n == 0 { // n == 0: a BEGIN marker without an END is no message for Salt
		return s, false
	}
	return strings.TrimRight(out, "\n"), true
}
