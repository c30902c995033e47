package tfstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is what most tests need: a service on a fresh database, its URL (for pg
// clients and for raw connections), and an actor.
type testBundle struct {
	svc   *Service
	db    *db.DB
	url   string
	actor Actor
}

type setupOpts struct {
	noKeeper bool
	maxConns int32
	opts     Options
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	return setupOn(t, url, o)
}

// setupOn builds a service on an existing test database (a second replica shares it).
func setupOn(t *testing.T, url string, o setupOpts) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxConns := o.maxConns
	if maxConns == 0 {
		maxConns = 8
	}
	d, err := db.Open(ctx, db.Options{URL: url, MaxConns: maxConns, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	opts := o.opts
	// In the Citus test mode (pgtest.EnvCitus) projects are distributed schemas, as the
	// server makes them when it detects Citus.
	opts.DistributeProjects = pgtest.Citus()
	if !o.noKeeper {
		opts.SessionURL = url
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 200 * time.Millisecond
	}
	svc, err := New(d, opts)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Close() })
	return &testBundle{svc: svc, db: d, url: url, actor: Actor{Name: "alice", RemoteAddr: "127.0.0.1", CanForceUnlock: true}}
}

func (b *testBundle) project(t *testing.T, name string) {
	t.Helper()
	_, created, err := b.svc.ProjectPut(context.Background(), b.actor, name)
	require.NoError(t, err)
	require.True(t, created)
}

// rawSession is a plain connection standing in for a pg backend client (or psql).
func rawSession(t *testing.T, url string) *db.Session {
	t.Helper()
	s, err := db.OpenSession(context.Background(), url, "strata", "pg-client-test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func rawExec(t *testing.T, s *db.Session, sql string, args ...any) {
	t.Helper()
	_, err := s.Exec(context.Background(), &db.Query{Name: "test", Text: sql}, args...)
	require.NoError(t, err)
}

func rawBool(t *testing.T, s *db.Session, sql string, args ...any) bool {
	t.Helper()
	var ok bool
	require.NoError(t, s.QueryRow(context.Background(), &db.Query{Name: "test", Text: sql}, args...).Scan(&ok))
	return ok
}

func lockBody(id string) []byte {
	b, _ := json.Marshal(api.LockInfo{ID: id, Operation: "OperationTypeApply", Who: "alice@host", Version: "1.11.4", Created: time.Now().UTC()})
	return b
}

func stateJSON(serial int64, lineage string, resources int) []byte {
	res := "[]"
	if resources > 0 {
		res = `[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[]}]`
	}
	return fmt.Appendf(nil, "{\n  \"version\": 4,\n  \"terraform_version\": \"1.11.4\",\n  \"serial\": %d,\n  \"lineage\": %q,\n  \"outputs\": {},\n  \"resources\": %s,\n  \"check_results\": null\n}\n", serial, lineage, res)
}

func randName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// requireKind asserts err is a fault of kind.
func requireKind(t *testing.T, err error, kind fault.Kind) *fault.Error {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, kind, fault.KindOf(err), "%v", err)
	var fe *fault.Error
	require.ErrorAs(t, err, &fe)
	return fe
}

// requireLocked asserts a 423 whose body parses as a LockInfo, as Terraform parses it.
func requireLocked(t *testing.T, err error) api.LockInfo {
	t.Helper()
	fe := requireKind(t, err, fault.KindLocked)
	require.Equal(t, "application/json", fe.ContentType)
	var info api.LockInfo
	require.NoError(t, json.Unmarshal(fe.Body, &info), string(fe.Body))
	require.NotEmpty(t, info.ID)
	return info
}

func hexString(b []byte) string { return hex.EncodeToString(b) }
