package sls

import (
	"regexp"
	"strconv"
	"strings"
)

// fnmatchRegexp compiles a shell pattern the way Python's fnmatch.translate does (CPython
// 3.11), because Salt matches minion-id globs in top.sls and SLS-name globs in top.sls and
// include: with fnmatch.fnmatch, and a Go glob (path.Match, filepath.Match) differs: its '*'
// stops at '/', '\' escapes, and '[' without a closing ']' is an error rather than a
// literal. The translation is followed exactly, including its quirks: a '[' with no ']' is a
// literal, "[!...]" negates, a ']' first in a class is a member, '-' first or last in a
// class is a member, an empty range such as "[z-a]" is dropped, and '\' has no special
// meaning. Matching is case-sensitive, as fnmatch.fnmatch is on POSIX masters.
func fnmatchRegexp(pat string) *regexp.Regexp {
	p := []rune(pat)
	var b strings.Builder
	b.WriteString(`^(?s:`)
	i, n := 0, len(p)
	lastStar := false
	for i < n {
		c := p[i]
		i++
		if c == '*' {
			if !lastStar {
				b.WriteString(`.*`)
			}
			lastStar = true
			continue
		}
		lastStar = false
		switch c {
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i
			if j < n && p[j] == '!' {
				j++
			}
			if j < n && p[j] == ']' {
				j++
			}
			for j < n && p[j] != ']' {
				j++
			}
			if j >= n {
				b.WriteString(`\[`)
				continue
			}
			b.WriteString(pyClass(p, i, j))
			i = j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)\z`)
	return regexp.MustCompile(b.String())
}

// pyElem is one character of a Python character-class source after fnmatch's escaping:
// escaped elements are literal even when they are '-'.
type pyElem struct {
	r       rune
	escaped bool
}

// pyClass translates the class body p[i:j] (between '[' and ']') as fnmatch.translate
// builds it and as Python's re parses the result, and renders it for Go with every member
// spelled \x{...}, so that no character can carry a meaning in RE2 it lacks in Python.
func pyClass(p []rune, i, j int) string {
	stuff := p[i:j]
	var elems []pyElem
	if !containsRune(stuff, '-') {
		for _, r := range stuff {
			elems = append(elems, pyElem{r, r == '\\'})
		}
	} else {
		var chunks [][]rune
		k := i + 1
		if p[i] == '!' {
			k = i + 2
		}
		for {
			k = indexRune(p, '-', k, j)
			if k < 0 {
				break
			}
			chunks = append(chunks, append([]rune(nil), p[i:k]...))
			i = k + 1
			k += 3
		}
		if chunk := p[i:j]; len(chunk) > 0 {
			chunks = append(chunks, append([]rune(nil), chunk...))
		} else {
			chunks[len(chunks)-1] = append(chunks[len(chunks)-1], '-')
		}
		// Remove empty ranges, as fnmatch does ("invalid in RE").
		for k := len(chunks) - 1; k > 0; k-- {
			prev, cur := chunks[k-1], chunks[k]
			if len(prev) > 0 && len(cur) > 0 && prev[len(prev)-1] > cur[0] {
				merged := append(append([]rune(nil), prev[:len(prev)-1]...), cur[1:]...)
				chunks[k-1] = merged
				chunks = append(chunks[:k], chunks[k+1:]...)
			}
		}
		for ci, ch := range chunks {
			if ci > 0 {
				elems = append(elems, pyElem{'-', false}) // a range operator
			}
			for _, r := range ch {
				elems = append(elems, pyElem{r, r == '\\' || r == '-'})
			}
		}
	}
	// fnmatch escapes &, ~ and | (set operations in future Pythons): literals either way.
	if len(elems) == 0 {
		return `[^\x{0}-\x{10FFFF}]` // Python's "(?!)": an empty class never matches
	}
	if len(elems) == 1 && elems[0] == (pyElem{'!', false}) {
		return `.` // a negated empty class: any character
	}
	negate := false
	if elems[0] == (pyElem{'!', false}) {
		negate = true
		elems = elems[1:]
	} else if !elems[0].escaped && (elems[0].r == '^' || elems[0].r == '[') {
		elems[0].escaped = true
	}
	// Parse as sre_parse does: an unescaped ']' first is a member; "x-y" is a range unless
	// the '-' is the last element.
	var b strings.Builder
	b.WriteByte('[')
	if negate {
		b.WriteByte('^')
	}
	for k := 0; k < len(elems); k++ {
		lo := elems[k].r
		if k+2 < len(elems) && elems[k+1] == (pyElem{'-', false}) {
			hi := elems[k+2].r
			b.WriteString(hexRune(lo) + "-" + hexRune(hi))
			k += 2
			continue
		}
		b.WriteString(hexRune(lo))
	}
	b.WriteByte(']')
	return b.String()
}

func hexRune(r rune) string { return `\x{` + strconv.FormatInt(int64(r), 16) + `}` }

func containsRune(s []rune, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// indexRune is Python's str.find(sub, start, end) for one rune.
func indexRune(s []rune, r rune, start, end int) int {
	for k := start; k < end && k < len(s); k++ {
		if s[k] == r {
			return k
		}
	}
	return -1
}

// fnmatch reports whether name matches the shell pattern pat as Python's fnmatch.fnmatch
// does on POSIX.
func fnmatch(name, pat string) bool {
	return fnmatchRegexp(pat).MatchString(name)
}

// hasGlobMeta reports whether pat is a pattern rather than a literal name for fnmatch: a
// '[' without a closing ']' is a literal, but such names are never valid minion ids or SLS
// names anyway, so any of the three characters is enough.
func hasGlobMeta(pat string) bool {
	return strings.ContainsAny(pat, "*?[")
}
