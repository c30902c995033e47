package api

import (
	"strings"
	"testing"
)

// FuzzFindPGPBlocks: any text, any indentation and line ends — no panic, every block starts
// with the BEGIN marker at the line reported, and normalising is idempotent (the CLI and the
// server compare normalised text, so a second pass must not change it).
func FuzzFindPGPBlocks(f *testing.F) {
	f.Add("k: |\n  " + PGPBegin + "\n\n  hQEMA\n  " + PGPEnd + "\n")
	f.Add("a: " + PGPBegin + " x " + PGPEnd + "\r\nb: " + PGPBegin + "\n")
	f.Add("\t" + PGPBegin + "\n\t\tz\n \t" + PGPEnd)
	f.Fuzz(func(t *testing.T, src string) {
		lines := strings.Split(src, "\n")
		for _, b := range FindPGPBlocks([]byte(src)) {
			if !strings.HasPrefix(b.Armored, PGPBegin) {
				t.Fatalf("block %q does not start with the marker", b.Armored)
			}
			if b.Line < 1 || b.Line > len(lines) || !strings.Contains(lines[b.Line-1], PGPBegin) {
				t.Fatalf("block reported at line %d, which holds no marker", b.Line)
			}
			if NormalizeArmor(b.Armored) != b.Armored {
				t.Fatalf("normalising %q again changes it", b.Armored)
			}
		}
	})
}
