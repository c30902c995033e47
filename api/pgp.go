package api

import "strings"

// PGP messages in Salt pillar files (strata pillar import --gpg-homedir): the CLI finds and
// decrypts them, and the server's reader recognises the decrypted ones, so both sides must
// find and normalise a message byte for byte alike — which is why this lives in the package
// both use.

// PGPBegin and PGPEnd delimit an armored PGP message.
const (
	PGPBegin = "-----BEGIN PGP MESSAGE-----"
	PGPEnd   = "-----END PGP MESSAGE-----"
)

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
		col := strings.Index(lines[i], PGPBegin)
		if col < 0 {
			continue
		}
		first := lines[i][col:]
		if end := strings.Index(first, PGPEnd); end >= 0 { // BEGIN and END on one line
			out = append(out, PGPBlock{Line: i + 1, Armored: NormalizeArmor(first[:end+len(PGPEnd)])})
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.Contains(lines[j], PGPEnd) {
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
				ln = ln[:strings.Index(ln, PGPEnd)+len(PGPEnd)]
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
