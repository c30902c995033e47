// Package metadata validates and stores labels and annotations, the key/value metadata every
// resource carries.
//
// Keys follow Kubernetes: an optional DNS-subdomain prefix and a slash, then a name of at
// most 63 characters. They are stored split into (key_prefix, key_name) with ” for "no
// prefix" (never NULL), under a unique constraint, so no interleaving of writers can ever
// store a key twice (the Cloud Foundry lesson of seed 000).
package metadata

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

var (
	nameRE   = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// MaxAnnotationBytes bounds the total size of one resource's annotations, as Kubernetes does.
const MaxAnnotationBytes = 256 * 1024

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
// pointer names the key (field is the JSON pointer of the map, e.g. /metadata/labels).
func Validate(labels, annotations map[string]string) error {
	var errs []fault.FieldError
	for _, k := range sortedKeys(labels) {
		if _, _, err := SplitKey(k); err != nil {
			errs = append(errs, fault.FieldError{Field: "/metadata/labels/" + escapePointer(k), Message: "invalid label key: " + err.Error()})
			continue
		}
		if err := ValidateLabelValue(labels[k]); err != nil {
			errs = append(errs, fault.FieldError{Field: "/metadata/labels/" + escapePointer(k), Message: "invalid label value: " + err.Error()})
		}
	}
	total := 0
	for _, k := range sortedKeys(annotations) {
		if _, _, err := SplitKey(k); err != nil {
			errs = append(errs, fault.FieldError{Field: "/metadata/annotations/" + escapePointer(k), Message: "invalid annotation key: " + err.Error()})
		}
		if strings.ContainsRune(annotations[k], 0) {
			errs = append(errs, fault.FieldError{Field: "/metadata/annotations/" + escapePointer(k), Message: "annotation value must not contain the NUL character"})
		}
		total += len(k) + len(annotations[k])
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
