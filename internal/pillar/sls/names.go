package sls

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var (
	// categoryRE is strata's rule for a pillar category.
	categoryRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	// dnsLabelRE is strata's rule for a group name (resource.ValidateName), at most 63 bytes.
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// minionIDRE is strata's rule for a node name (resource.ValidateNodeName), repeated here
	// so that this pure package does not depend on the resource store.
	minionIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}$`)
)

// maxCategory is the longest category strata accepts.
const maxCategory = 100

const maxGroupName = 63

// validNode reports whether a minion id can name a strata node.
func validNode(id string) bool {
	return minionIDRE.MatchString(id) && id != "." && id != ".."
}

// validGroup reports whether name can name a strata org or group.
func validGroup(name string) bool { return len(name) <= maxGroupName && dnsLabelRE.MatchString(name) }

// shortHash is a stable 8-hex-digit digest, so that a generated name is the same on every
// run (re-importing a tree finds the same groups and categories) and two inputs that slug
// to the same text still get different names.
func shortHash(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:4])
}

// slug lower-cases s and turns every run of characters outside allowed into one '-',
// trimming '-' at both ends.
func slug(s string, allowed func(rune) bool) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if allowed(r) {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

func isAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

// category maps an SLS name to a strata category. A name that already obeys the category
// rule ([a-z0-9][a-z0-9_.-]*, at most maxCategory bytes) is kept as it is, so the usual
// "apache" and "users.admins" read the same in strata. Any other name is lower-cased, each
// run of other characters becomes '-', and "-" plus a hash of the original name is
// appended, so that "Apache" and "apache" (two SLS files on a case-sensitive file system)
// never collapse into one category; the result is cut to fit maxCategory.
func category(sls string) string {
	if len(sls) <= maxCategory && categoryRE.MatchString(sls) {
		return sls
	}
	base := slug(sls, func(r rune) bool { return isAlnum(r) || r == '_' || r == '.' || r == '-' })
	base = strings.TrimLeft(base, "_.-")
	suffix := shortHash("category", sls)
	if base == "" {
		return "sls-" + suffix
	}
	if limit := maxCategory - len(suffix) - 1; len(base) > limit {
		base = strings.TrimRight(base[:limit], "-")
	}
	return base + "-" + suffix
}

// groupName names the group a list, glob, compound or nodegroup target becomes. A
// nodegroup whose name is already a valid group name keeps it, since that is the name
// operators know; every other target gets "<matcher>-<slug of the expression>-<hash>",
// e.g. "glob-web-3fa9c2d1" for 'web*', cut to the 63 bytes of a DNS label.
func groupName(matcher, expr string) string {
	if matcher == "nodegroup" && len(expr) <= maxGroupName && dnsLabelRE.MatchString(expr) {
		return expr
	}
	prefix := matcher
	if prefix == "nodegroup" {
		prefix = "ng"
	}
	suffix := shortHash(matcher, expr)
	s := slug(expr, isAlnum)
	if limit := maxGroupName - len(prefix) - len(suffix) - 2; len(s) > limit {
		s = strings.Trim(s[:limit], "-")
	}
	if s == "" {
		return prefix + "-" + suffix
	}
	return prefix + "-" + s + "-" + suffix
}
