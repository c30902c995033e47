package db

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// RandomPassword returns a random password for a login role strata creates (48 hex digits:
// 192 bits).
func RandomPassword() string { return randomHex(24) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SCRAMVerifier computes PostgreSQL's SCRAM-SHA-256 verifier for password (RFC 5802/7677),
// the form CREATE ROLE … PASSWORD accepts pre-hashed.
func SCRAMVerifier(password string) string {
	const iterations = 4096
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	salted, _ := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	server := mac(salted, "Server Key")
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, enc(salt), enc(stored[:]), enc(server))
}

// ClientConnString rewrites strata's connection string for another client (a Terraform pg
// backend, a Salt master): same server, database and
// TLS settings, the project role's user and password, and none of pgx's pool_* settings
// (lib/pq, which Terraform and OpenTofu use, would send them to the server as parameters).
func ClientConnString(base, user, password string) string {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.User = url.UserPassword(user, password)
		qv := u.Query()
		for k := range qv {
			if strings.HasPrefix(k, "pool_") || k == "user" || k == "password" || k == "application_name" {
				qv.Del(k)
			}
		}
		u.RawQuery = qv.Encode()
		return u.String()
	}
	var parts []string
	for _, f := range strings.Fields(base) {
		k, _, _ := strings.Cut(f, "=")
		if strings.HasPrefix(k, "pool_") || k == "user" || k == "password" || k == "application_name" {
			continue
		}
		parts = append(parts, f)
	}
	parts = append(parts, "user="+user, "password="+password)
	return strings.Join(parts, " ")
}

// ConnTarget returns the host (a name, an address, or a Unix socket directory), port and
// database a connection string names, for clients configured by parts (a Salt master).
func ConnTarget(conn string) (host, port, database string) {
	cfg, err := pgconn.ParseConfig(conn)
	if err != nil {
		return "", "", ""
	}
	return cfg.Host, strconv.Itoa(int(cfg.Port)), cfg.Database
}
