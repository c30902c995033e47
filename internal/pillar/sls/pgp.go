package sls

import (
	"regexp"
	"strings"
)

const (
	pgpBegin = "-----BEGIN PGP MESSAGE-----"
	pgpEnd   = "-----END PGP MESSAGE-----"
)

// pgpMessage is what Salt's gpg renderer (salt/renderers/gpg.py, GPG_CIPHERTEXT) decrypts
// inside a string value: each shortest span from a BEGIN to an END marker, newlines
// included.
var pgpMessage = regexp.MustCompile(`(?s)` + regexp.QuoteMeta(pgpBegin) + `.*?` + regexp.QuoteMeta(pgpEnd))

// PGPBlock is an armored PGP message found in a file's text, for the CLI to decrypt.
type PGPBlock struct {
	// Line is the 1-based line of its BEGIN marker: where an undecrypted block is reported.
	Line int
	// Armored is the message from BEGIN to END with the block's indentation removed, as the
	// YAML value holding it reads once parsed, normalized by NormalizeArmor.
	Armored string
}

// FindPGPBlocks returns the armored PGP messages in a file's text, in order. A message is
// usually a YAML block scalar ("password: |" and indented lines), so the indentation common
// to the lines after the BEGIN marker is removed, which gives the text both gpg and the
// parsed value see. The CLI and the reader both use it, so that what the CLI decrypted is
// recognised by the reader byte for byte. A BEGIN marker without an END is returned from
// its marker to the end of the text (gpg then fails on it, naming the line).
func FindPGPBlocks(src []byte) []PGPBlock {
	lines := strings.Split(string(src), "\n")
	var out []PGPBlock
	for i := 0; i < len(lines); i++ {
		col := strings.Index(lines[i], pgpBegin)
		if col < 0 {
			continue
		}
		first := lines[i][col:]
		if end := strings.Index(first, pgpEnd); end >= 0 { // BEGIN and END on one line
			out = append(out, PGPBlock{Line: i + 1, Armored: NormalizeArmor(first[:end+len(pgpEnd)])})
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.Contains(lines[j], pgpEnd) {
			j++
		}
		rest := lines[i+1 : min(j+1, len(lines))]
		indent := -1
		for _, ln := range rest {
			if strings.TrimSpace(ln) == "" {
				continue
			}
			n := len(ln) - len(strings.TrimLeft(ln, " \t"))
			if indent < 0 || n < indent {
				indent = n
			}
		}
		var sb strings.Builder
		sb.WriteString(first)
		for k, ln := range rest {
			sb.WriteByte('\n')
			if strings.TrimSpace(ln) != "" {
				ln = ln[max(indent, 0):]
			}
			if k == len(rest)-1 && j < len(lines) {
				ln = ln[:strings.Index(ln, pgpEnd)+len(pgpEnd)]
			}
			sb.WriteString(ln)
		}
		out = append(out, PGPBlock{Line: i + 1, Armored: NormalizeArmor(sb.String())})
		i = j
	}
	return out
}

// NormalizeArmor is the form an armored message is compared in, on the CLI's side and the
// reader's: CRLF line ends made LF, spaces and tabs ending a line removed, and the whole
// trimmed. Armor ignores that whitespace, while a YAML file edited on another system, or a
// literal block's trailing spaces, would otherwise make the same message two keys.
func NormalizeArmor(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, ln := range lines {
		lines[i] = strings.TrimRight(ln, " \t\r")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

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
