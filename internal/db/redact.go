package db

import (
	"net/url"
	"regexp"
	"strings"
)

// redactMask replaces every secret Redact finds. It says nothing of the secret's length.
const redactMask = "****"

// keywordPassword matches a password in the keyword/value form (`password=s3cret`,
// `password = 'with spaces\' and quotes'`), and sslpassword alike.
var keywordPassword = regexp.MustCompile(`(?i)\b(ssl)?password\s*=\s*('(?:\\.|[^'\\])*'?|\S*)`)

// Redact returns a connection string or URL with every password it carries masked: the
// password of its userinfo, and password and sslpassword parameters, in both the URL and the
// keyword/value forms. It is the one redaction used wherever strata shows a URL a user gave
// it — flag defaults in --help, errors and logs — because those are how database passwords
// reach CI logs and support tickets. It never fails: malformed input is masked generously
// (a password holding an unescaped '@' or '/' is still masked whole) rather than shown.
func Redact(conn string) string {
	scheme, rest, ok := strings.Cut(conn, "://")
	if !ok || strings.ContainsAny(scheme, " \t=") {
		return keywordPassword.ReplaceAllString(conn, "${1}password="+redactMask)
	}
	// The userinfo ends at the last '@' before the query: a password with an unescaped '/'
	// or '@' in it is masked whole rather than split at a guessed boundary.
	query := ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest, query = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if user, _, hasPassword := strings.Cut(rest[:at], ":"); hasPassword {
			rest = user + ":" + redactMask + rest[at:]
		}
	}
	return scheme + "://" + rest + redactQuery(query)
}

// redactQuery masks password and sslpassword values in a URL's query ("?a=1&password=x#f"),
// recognizing keys however they are percent-encoded.
func redactQuery(q string) string {
	if q == "" || q[0] != '?' {
		return q
	}
	body, frag := q[1:], ""
	if i := strings.IndexByte(body, '#'); i >= 0 {
		body, frag = body[:i], body[i:]
	}
	parts := strings.Split(body, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			key = k
		}
		if key = strings.ToLower(key); hasValue && (key == "password" || key == "sslpassword") {
			parts[i] = k + "=" + redactMask
		}
	}
	return "?" + strings.Join(parts, "&") + frag
}
