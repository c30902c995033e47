// Package metadata validates and stores labels and annotations, the key/value metadata every
// resource carries, and parses the label selectors that filter lists by them.
//
// Keys follow Kubernetes: an optional DNS-subdomain prefix and a slash, then a name of at
// most 63 characters. They are stored split into (key_prefix, key_name) with the empty
// string for "no prefix" (never NULL), under a unique constraint, so no interleaving of
// writers can ever store a key twice (the Cloud Foundry lesson of seed 000).
//
// On top of the Kubernetes rules strata adds Cloud Controller's limits, because every label
// and every selector requirement costs the store rows and query conditions: at most
// MaxLabels labels and MaxAnnotations annotations per resource, annotation values of at most
// MaxAnnotationValueLength characters, and at most MaxRequirements requirements per
// selector. The prefix ReservedPrefix and its subdomains belong to strata itself and are
// refused in user keys, so that labels strata may set one day cannot collide with a user's.
//
// Selectors use the grammar of Kubernetes (k8s.io/apimachinery/pkg/labels.Parse):
// requirements separated by ',' and ANDed; k=v, k==v, k!=v, k in (a,b), k notin (a,b), k and
// !k; whitespace between tokens; "" selects everything. Kubernetes' quirks are kept so that
// a selector means the same in both: "env=" and "env in ()" select the empty value, and a
// bare "in" is a key. strata differs deliberately in four ways:
//
//   - The operators > and < are refused ("operator > is not supported"); Kubernetes reads
//     them as integer comparisons, which strata's text-valued store does not offer.
//   - A selector with more than MaxRequirements requirements is refused; Kubernetes has no
//     limit.
//   - Inside a value list every empty slot is the empty value, so "(a,,)" is {"", "a"}.
//     Kubernetes' parser refuses an even run of commas before ')' ("(a,,)", "(,,)") while
//     accepting "(a,,b)", "(a,)" and "(,,,)"; that is an accident of its lookahead, not a
//     rule, and strata accepts those selectors with the meaning the others already have.
//   - A NUL byte is an ordinary byte, so any selector holding one is invalid. Kubernetes'
//     lexer reads NUL as the end of the selector in some positions ("env \x00garbage" is
//     "env" there) and drops it in others, which would let a selector mean less than it says.
//
// Otherwise strata means to agree with Kubernetes exactly: it accepts what Kubernetes
// accepts, with the same meaning, and refuses what it refuses, though with its own messages
// and a byte position (SelectorError).
package metadata

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/stratahq/strata/internal/fault"
)

var (
	nameRE   = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// MaxAnnotationBytes bounds the total size of one resource's annotations, as Kubernetes does.
const MaxAnnotationBytes = 256 * 1024

// Per-resource limits, Cloud Controller's defaults. They bound the rows one resource costs
// the metadata tables and the size of every list response that carries metadata.
const (
	MaxLabels      = 50
	MaxAnnotations = 200
	// MaxAnnotationValueLength is in characters, not bytes, because the value column is a
	// varchar(5000) and PostgreSQL counts characters.
	MaxAnnotationValueLength = 5000
)

// ReservedPrefix is the key prefix strata keeps for itself; it and every subdomain of it
// (x.strata.io) are refused in user keys so that strata can add its own labels later
// without meeting a user's.
const ReservedPrefix = "strata.io"

// IsReserved reports whether a key prefix is ReservedPrefix or a subdomain of it. It
// ignores ASCII case so that a caller checking a prefix before validating it cannot be
// fooled by "Strata.IO"; valid prefixes are lowercase anyway.
func IsReserved(prefix string) bool {
	p := strings.ToLower(prefix)
	return p == ReservedPrefix || strings.HasSuffix(p, "."+ReservedPrefix)
}

// reservedMessage explains a reserved prefix, naming the rule and not only the prefix,
// since "x.strata.io" is refused for being under strata.io.
func reservedMessage(kind, prefix string) string {
	return fmt.Sprintf("invalid %s key: prefix %q is reserved: %s and its subdomains belong to strata", kind, prefix, ReservedPrefix)
}

// SplitKey splits a key into prefix and name, validating both.
func SplitKey(key string) (prefix, name string, err error) {
	prefix, name, found := strings.Cut(key, "/")
	if !found {
		prefix, name = "", key
	} else {
		if prefix == "" {
			return "", "", fmt.Errorf("prefix part must not be empty")
		}
		if len(prefix) > 253 || !prefixRE.MatchString(prefix) {
			return "", "", fmt.Errorf("prefix part must be a lowercase DNS subdomain of at most 253 characters")
		}
	}
	if name == "" {
		return "", "", fmt.Errorf("name part must not be empty")
	}
	if len(name) > 63 {
		return "", "", fmt.Errorf("name part must be at most 63 characters")
	}
	if !nameRE.MatchString(name) {
		return "", "", fmt.Errorf("name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric")
	}
	return prefix, name, nil
}

// ValidateLabelValue checks a label value: at most 63 characters of the name alphabet, or empty.
func ValidateLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 {
		return fmt.Errorf("value must be at most 63 characters")
	}
	if !nameRE.MatchString(v) {
		return fmt.Errorf("value must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric")
	}
	return nil
}

// Validate checks labels and annotations and returns every problem as a field error whose
// pointer names the key (field is the JSON pointer of the map, e.g. /metadata/labels), or the
// map itself for a limit on the whole map. It reports every problem at once so that a
// client fixes its request in one round trip.
func Validate(labels, annotations map[string]string) error {
	var errs []fault.FieldError
	if len(labels) > MaxLabels {
		errs = append(errs, fault.FieldError{Field: "/metadata/labels", Message: fmt.Sprintf("at most %d labels, got %d", MaxLabels, len(labels))})
	}
	if len(annotations) > MaxAnnotations {
		errs = append(errs, fault.FieldError{Field: "/metadata/annotations", Message: fmt.Sprintf("at most %d annotations, got %d", MaxAnnotations, len(annotations))})
	}
	for _, k := range sortedKeys(labels) {
		field := "/metadata/labels/" + escapePointer(k)
		prefix, _, err := SplitKey(k)
		if err != nil {
			errs = append(errs, fault.FieldError{Field: field, Message: "invalid label key: " + err.Error()})
			continue
		}
		if IsReserved(prefix) {
			errs = append(errs, fault.FieldError{Field: field, Message: reservedMessage("label", prefix)})
		}
		if err := ValidateLabelValue(labels[k]); err != nil {
			errs = append(errs, fault.FieldError{Field: field, Message: "invalid label value: " + err.Error()})
		}
	}
	total := 0
	for _, k := range sortedKeys(annotations) {
		field := "/metadata/annotations/" + escapePointer(k)
		v := annotations[k]
		if prefix, _, err := SplitKey(k); err != nil {
			errs = append(errs, fault.FieldError{Field: field, Message: "invalid annotation key: " + err.Error()})
		} else if IsReserved(prefix) {
			errs = append(errs, fault.FieldError{Field: field, Message: reservedMessage("annotation", prefix)})
		}
		if strings.ContainsRune(v, 0) {
			errs = append(errs, fault.FieldError{Field: field, Message: "annotation value must not contain the NUL character"})
		}
		if n := utf8.RuneCountInString(v); n > MaxAnnotationValueLength {
			errs = append(errs, fault.FieldError{Field: field, Message: fmt.Sprintf("annotation value must be at most %d characters, got %d", MaxAnnotationValueLength, n)})
		}
		total += len(k) + len(v)
	}
	if total > MaxAnnotationBytes {
		errs = append(errs, fault.FieldError{Field: "/metadata/annotations", Message: fmt.Sprintf("annotations total %d bytes, more than the limit of %d", total, MaxAnnotationBytes)})
	}
	if len(errs) > 0 {
		return fault.InvalidFields("invalid metadata: "+errs[0].Message, errs)
	}
	return nil
}

// Split returns the keys of m split into parallel prefix, name and value slices, for one
// bulk statement (unnest) that writes them all.
func Split(m map[string]string) (prefixes, names, values []string) {
	prefixes, names, values = []string{}, []string{}, []string{}
	for _, k := range sortedKeys(m) {
		p, n, _ := SplitKey(k)
		prefixes = append(prefixes, p)
		names = append(names, n)
		values = append(values, m[k])
	}
	return prefixes, names, values
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// escapePointer escapes a map key for use in a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
