package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
)

const secretPW = "s3cr3t-Pw"

// TestRedact: every password a connection string can carry is masked, in both forms and in
// malformed input, and everything else is kept so the string still says where it points.
func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://strata:" + secretPW + "@db.example:5432/strata?sslmode=require", "postgres://strata:****@db.example:5432/strata?sslmode=require"},
		{"postgresql://strata@db.example/strata", "postgresql://strata@db.example/strata"},
		{"postgres://strata:" + secretPW + "@h1:5432,h2:5432/db?target_session_attrs=read-write", "postgres://strata:****@h1:5432,h2:5432/db?target_session_attrs=read-write"},
		{"postgres://u:" + secretPW + "/x@y@h/db", "postgres://u:****@h/db"},
		{"postgres://u@h/db?sslmode=require&password=" + secretPW + "#frag", "postgres://u@h/db?sslmode=require&password=****#frag"},
		{"postgres://u@h/db?pass%77ord=" + secretPW + "&sslpassword=" + secretPW, "postgres://u@h/db?pass%77ord=****&sslpassword=****"},
		{"https://admin:" + secretPW + "@strata.example:8443", "https://admin:****@strata.example:8443"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"host=db.example password=" + secretPW + " dbname=strata", "host=db.example password=**** dbname=strata"},
		{"host=db.example password = '" + secretPW + ` \' x' sslpassword=` + secretPW, "host=db.example password=**** sslpassword=****"},
		{"host=h PASSWORD='" + secretPW, "host=h password=****"},
		{"", ""},
	} {
		got := db.Redact(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.NotContains(t, got, "s3cr3t", tc.in)
	}
}

// TestOpenErrorsHideThePassword: a database URL that cannot be used is named in the error
// without its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://u:" + secretPW + "@h:badport/db",
		"postgres://u:" + secretPW + "@h/db?sslmode=bogus",
		"postgres://u:" + secretPW + "/x@h/db?x=%zz",
		"host=h password=" + secretPW + " sslmode=bogus",
		"host=h password='" + secretPW + " x' port=x",
		"postgres://u@h/db?password=" + secretPW + "&sslmode=bad",
	} {
		_, err := db.Open(context.Background(), db.Options{URL: u, Schema: "strata"})
		require.Error(t, err, u)
		require.NotContains(t, err.Error(), "s3cr3t", u)
		_, err = db.OpenSession(context.Background(), u, "strata", "test")
		require.Error(t, err, u)
		require.NotContains(t, err.Error(), "s3cr3t", u)
	}
}
