package metadata

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Op is a requirement's operator after normalisation. The spellings of one test ("=", "=="
// and "in" all ask for a listed value) share one Op, so that equal selectors compare equal
// and the store has one query shape per Op.
type Op string

// The four operators a selector can use.
const (
	OpIn        Op = "in"     // k=v, k==v, k in (a,b)
	OpNotIn     Op = "notin"  // k!=v, k notin (a,b)
	OpExists    Op = "exists" // k
	OpNotExists Op = "!"      // !k
)

// Requirement is one condition of a selector; a label set must meet every requirement of a
// selector to match it.
type Requirement struct {
	Key    string   // the key as written, e.g. "example.com/team"
	Prefix string   // "" when none
	Name   string   // the key's name part
	Op     Op       // the normalised operator
	Values []string // deduplicated and sorted; nil for exists/!; may contain "" (k=, k in ())
}

// Selector is a parsed label selector: the AND of its requirements. The requirements are
// sorted by Key, then Op, then Values, so that two spellings of one selector parse to equal
// values; an empty selector selects everything.
type Selector struct{ Requirements []Requirement }

// MaxRequirements bounds a selector, because every requirement costs the store one more
// condition in the list query (Cloud Controller's limit, which strata keeps).
const MaxRequirements = 50

// SelectorError reports where and why a selector is invalid, so that a 400 can point the
// client at the offending byte. Pos is the 0-based byte offset in the selector; it equals
// the selector's length when the selector ends too early.
type SelectorError struct {
	Pos int
	Msg string
}

// Error renders the error as "position N: msg".
func (e *SelectorError) Error() string {
	return fmt.Sprintf("position %d: %s", e.Pos, e.Msg)
}

// tokenKind classifies the lexer's tokens. The keywords "in" and "notin" are identifiers
// to the lexer: only the parser knows whether a word stands where an operator may stand,
// which is what makes a bare "in" a key, as in Kubernetes.
type tokenKind int

const (
	tokEnd      tokenKind = iota // end of the selector
	tokIdent                     // a run of bytes that are neither whitespace nor symbols
	tokNot                       // !
	tokEquals                    // =
	tokDouble                    // ==
	tokNotEqual                  // !=
	tokOpen                      // (
	tokClose                     // )
	tokComma                     // ,
	tokGreater                   // >
	tokLess                      // <
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

// isSpace reports the whitespace the grammar tolerates between tokens; any other byte,
// Unicode spaces included, belongs to an identifier and is then refused by key or value
// validation.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// isSymbol reports the bytes that end an identifier and form operator tokens on their own.
func isSymbol(c byte) bool {
	switch c {
	case '=', '!', '(', ')', ',', '>', '<':
		return true
	}
	return false
}

// lex splits a selector into tokens, ending with one tokEnd at len(s). Symbols take the
// longest match ("==" and "!=" over "=" and "!"), so "===" is "==" then "=".
func lex(s string) []token {
	var toks []token
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return append(toks, token{kind: tokEnd, pos: i})
		}
		start := i
		var kind tokenKind
		switch c := s[i]; {
		case c == '=':
			kind, i = tokEquals, i+1
			if i < len(s) && s[i] == '=' {
				kind, i = tokDouble, i+1
			}
		case c == '!':
			kind, i = tokNot, i+1
			if i < len(s) && s[i] == '=' {
				kind, i = tokNotEqual, i+1
			}
		case c == '(':
			kind, i = tokOpen, i+1
		case c == ')':
			kind, i = tokClose, i+1
		case c == ',':
			kind, i = tokComma, i+1
		case c == '>':
			kind, i = tokGreater, i+1
		case c == '<':
			kind, i = tokLess, i+1
		default:
			kind = tokIdent
			for i < len(s) && !isSpace(s[i]) && !isSymbol(s[i]) {
				i++
			}
		}
		toks = append(toks, token{kind: kind, text: s[start:i], pos: start})
	}
}

// parser walks the token list; the list always ends with tokEnd, and next never moves past
// it, so peeking is always safe.
type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

// describe names a token for an error message, quoting and shortening what the client
// wrote so that a huge or binary selector does not come back verbatim in the response.
func describe(t token) string {
	if t.kind == tokEnd {
		return "end of string"
	}
	return quote(t.text)
}

// quote quotes s for a message, cut to 64 bytes, on a rune boundary when s is UTF-8.
func quote(s string) string {
	const limit = 64
	if len(s) <= limit {
		return fmt.Sprintf("%q", s)
	}
	cut := limit
	for cut > limit-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}

func unexpected(t token, expected string) *SelectorError {
	return &SelectorError{Pos: t.pos, Msg: fmt.Sprintf("found %s, expected %s", describe(t), expected)}
}

// ParseSelector parses a Kubernetes label selector, with the differences the package
// documentation lists. The error, when not nil, is a *SelectorError.
func ParseSelector(s string) (Selector, error) {
	p := &parser{toks: lex(s)}
	if p.peek().kind == tokEnd {
		return Selector{}, nil
	}
	var reqs []Requirement
	for {
		if len(reqs) == MaxRequirements {
			return Selector{}, &SelectorError{Pos: p.peek().pos, Msg: fmt.Sprintf("a selector may have at most %d requirements", MaxRequirements)}
		}
		r, err := p.requirement()
		if err != nil {
			return Selector{}, err
		}
		reqs = append(reqs, r)
		switch t := p.next(); t.kind {
		case tokEnd:
			sortRequirements(reqs)
			return Selector{Requirements: reqs}, nil
		case tokComma:
			// A trailing comma is an error, as in Kubernetes: "a=b," is not "a=b".
			if n := p.peek(); n.kind != tokIdent && n.kind != tokNot {
				return Selector{}, unexpected(n, "a key or '!' after ','")
			}
		default:
			return Selector{}, unexpected(t, "',' or end of string")
		}
	}
}

// requirement parses one requirement: "!k", "k", "k op value" or "k in|notin (values)".
func (p *parser) requirement() (Requirement, error) {
	t := p.next()
	negated := t.kind == tokNot
	if negated {
		t = p.next()
	}
	if t.kind != tokIdent {
		if negated {
			return Requirement{}, unexpected(t, "a key after '!'")
		}
		return Requirement{}, unexpected(t, "a key or '!'")
	}
	prefix, name, err := SplitKey(t.text)
	if err != nil {
		return Requirement{}, &SelectorError{Pos: t.pos, Msg: fmt.Sprintf("invalid key %s: %v", quote(t.text), err)}
	}
	r := Requirement{Key: t.text, Prefix: prefix, Name: name}
	if negated {
		// "!k" takes no operator; whatever follows must end the requirement.
		r.Op = OpNotExists
		return r, nil
	}
	op := p.peek()
	switch {
	case op.kind == tokEnd || op.kind == tokComma:
		r.Op = OpExists
		return r, nil
	case op.kind == tokEquals || op.kind == tokDouble || op.kind == tokNotEqual:
		p.next()
		r.Op = OpIn
		if op.kind == tokNotEqual {
			r.Op = OpNotIn
		}
		v, err := p.exactValue()
		if err != nil {
			return Requirement{}, err
		}
		r.Values = []string{v}
		return r, nil
	case op.kind == tokIdent && (op.text == "in" || op.text == "notin"):
		p.next()
		r.Op = OpIn
		if op.text == "notin" {
			r.Op = OpNotIn
		}
		vs, err := p.valueList()
		if err != nil {
			return Requirement{}, err
		}
		r.Values = vs
		return r, nil
	case op.kind == tokGreater || op.kind == tokLess:
		// Kubernetes reads these as integer comparisons; strata's store compares label
		// values as text only, so it refuses them rather than answer differently.
		return Requirement{}, &SelectorError{Pos: op.pos, Msg: fmt.Sprintf("operator %s is not supported", op.text)}
	default:
		return Requirement{}, unexpected(op, "an operator (in, notin, =, ==, !=), ',' or end of string")
	}
}

// exactValue reads the value after =, == or !=. A missing value is the empty value, as in
// Kubernetes: "env=" selects labels env whose value is "".
func (p *parser) exactValue() (string, error) {
	t := p.peek()
	switch t.kind {
	case tokEnd, tokComma:
		return "", nil
	case tokIdent:
		p.next()
		return t.text, checkValue(t)
	default:
		return "", unexpected(t, "a value, ',' or end of string")
	}
}

// valueList reads "(v1,v2,...)". Every slot may be empty and then holds the empty value, so
// "()" and "(,)" both mean {""}, as in Kubernetes.
func (p *parser) valueList() ([]string, error) {
	if t := p.next(); t.kind != tokOpen {
		return nil, unexpected(t, "'('")
	}
	var vs []string
	for {
		v := ""
		if t := p.peek(); t.kind == tokIdent {
			p.next()
			if err := checkValue(t); err != nil {
				return nil, err
			}
			v = t.text
		}
		vs = append(vs, v)
		switch t := p.next(); t.kind {
		case tokComma:
		case tokClose:
			slices.Sort(vs)
			return slices.Compact(vs), nil
		default:
			if v == "" {
				return nil, unexpected(t, "a value, ',' or ')'")
			}
			return nil, unexpected(t, "',' or ')'")
		}
	}
}

func checkValue(t token) error {
	if err := ValidateLabelValue(t.text); err != nil {
		return &SelectorError{Pos: t.pos, Msg: fmt.Sprintf("invalid value %s: %v", quote(t.text), err)}
	}
	return nil
}

// sortRequirements orders requirements by Key, then Op, then Values. Values break the tie so
// that "x=a,x=b" and "x=b,x=a" give equal Selectors and one canonical String.
func sortRequirements(reqs []Requirement) {
	slices.SortFunc(reqs, func(a, b Requirement) int {
		if c := cmp.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Op, b.Op); c != 0 {
			return c
		}
		return slices.Compare(a.Values, b.Values)
	})
}

// Matches reports whether labels meet every requirement; a nil map is an empty label set.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.Requirements {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// Matches reports whether labels meet the requirement. in needs the key present with a
// listed value; notin also matches when the key is absent, as Kubernetes and Cloud Foundry
// both do; exists and ! test presence only.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case OpIn:
		return ok && slices.Contains(r.Values, v)
	case OpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case OpExists:
		return ok
	case OpNotExists:
		return !ok
	}
	return false
}

// String renders the requirement in the shortest spelling that parses back to it: "k=v" and
// "k!=v" for one value, the set form for several.
func (r Requirement) String() string {
	switch r.Op {
	case OpExists:
		return r.Key
	case OpNotExists:
		return "!" + r.Key
	case OpIn:
		if len(r.Values) == 1 {
			return r.Key + "=" + r.Values[0]
		}
		return r.Key + " in (" + strings.Join(r.Values, ",") + ")"
	case OpNotIn:
		if len(r.Values) == 1 {
			return r.Key + "!=" + r.Values[0]
		}
		return r.Key + " notin (" + strings.Join(r.Values, ",") + ")"
	}
	return r.Key + " " + string(r.Op) + " (" + strings.Join(r.Values, ",") + ")"
}

// String renders the selector canonically: requirements in their sorted order, joined by
// ",". The result parses back to an equal Selector, so it can serve as a cache key or be
// echoed in a continue token.
func (s Selector) String() string {
	parts := make([]string, len(s.Requirements))
	for i, r := range s.Requirements {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}
