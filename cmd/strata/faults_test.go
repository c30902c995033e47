package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgtest"
)

// TestReadOnlyDatabaseIsA503 (issue 18, item 2): with the database read-only (an operator's
// default_transaction_read_only during maintenance), writes answered an opaque 500 while
// /readyz stayed 200, so a balancer kept sending writes. Now a write is a 503 problem with
// reason "read-only" and Retry-After, /readyz is a 503 with the same reason (and nothing of
// the database's address or role), reads keep working, and all is back once the database
// accepts writes again.
func TestReadOnlyDatabaseIsA503(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("readOnlyTokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	call := func(method, path, body string) answer { return callAs(t, s.url, token, method, path, body) }
	require.Equal(t, 201, call("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`).status)
	st := call("GET", "/v1/status", "")
	require.Equal(t, 200, st.status, st.body)
	require.Contains(t, st.body, `"checks"`, "the admin's view of the replica: strata doctor's checks")

	// setReadOnly flips the database's default and ends strata's sessions, so its pool
	// reconnects under the new default (as after a maintenance restart).
	setReadOnly := func(on bool) {
		stmt := "RESET default_transaction_read_only"
		if on {
			stmt = "SET default_transaction_read_only = on"
		}
		_, err := admin.Exec(ctx, &db.Query{Name: "ro", Text: `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I ` + stmt + `', current_database()); END $$`})
		require.NoError(t, err)
		_, err = admin.Exec(ctx, &db.Query{Name: "kick", Text: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'strata%'`})
		require.NoError(t, err)
	}
	setReadOnly(true)
	var w answer
	require.Eventually(t, func() bool {
		w = call("POST", "/v1/orgs", `{"metadata":{"name":"web"}}`)
		return w.reason == "read-only"
	}, 30*time.Second, 100*time.Millisecond, "a write on a read-only database: %+v", w)
	require.Equal(t, 503, w.status, w.body)
	require.Equal(t, "10", w.retry)
	var ready answer
	require.Eventually(t, func() bool {
		ready = call("GET", "/readyz", "")
		return ready.status == 503
	}, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, "read-only", ready.reason, ready.body)
	require.NotEmpty(t, ready.retry)
	for _, secret := range []string{"user=", "host=", "5432", "strata@"} {
		require.NotContains(t, ready.body, secret, "readiness says nothing of the database's address or role")
	}
	require.Eventually(t, func() bool { return call("GET", "/v1/orgs/acme", "").status == 200 }, 30*time.Second, 100*time.Millisecond,
		"reads still work")

	setReadOnly(false)
	var back, readyAgain answer
	require.Eventually(t, func() bool {
		if back.status != 201 {
			back = call("POST", "/v1/orgs", `{"metadata":{"name":"web"}}`)
		}
		readyAgain = call("GET", "/readyz", "")
		return back.status == 201 && readyAgain.status == 200
	}, 30*time.Second, 100*time.Millisecond, "writes and readiness come back: %+v %+v", back, readyAgain)
}

// TestServeWaitsForItsDatabase (issue 18, item 3): serve exited at once (rc 1) when its
// database was down at boot, so a supervisor was mandatory. Now it listens at once — /healthz
// 200, everything else 503 with reason unavailable — retries the database with a growing
// pause, logging each attempt, and serves when the database appears. The database here is
// behind a TCP proxy that refuses connections until the test lets them through.
func TestServeWaitsForItsDatabase(t *testing.T) {
	t.Parallel()
	target := pgtest.NewDatabaseURL(t)
	cfg, err := pgconnParse(target)
	require.NoError(t, err)
	proxy := newGateProxy(t, cfg.dial)
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=2", cfg.user, proxy.addr, cfg.database)

	token := "strata_" + strings.Repeat("waitDatabaseTok", 3)
	s := startServerEarly(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	get := func(path string) (int, string) {
		a := callAs(t, s.url, token, "GET", path, "")
		return a.status, a.body
	}
	st, _ := get("/healthz")
	require.Equal(t, 200, st, "alive while waiting")
	st, body := get("/readyz")
	require.Equal(t, 503, st)
	require.Contains(t, body, `"reason":"unavailable"`)
	st, _ = get("/v1/orgs")
	require.Equal(t, 503, st)
	require.Eventually(t, func() bool { return strings.Count(s.stderr.String(), "waiting for the database") >= 2 }, 30*time.Second, 50*time.Millisecond,
		"each attempt is logged:\n%s", s.stderr.String())

	proxy.open()
	require.Eventually(t, func() bool { st, _ := get("/readyz"); return st == 200 }, 60*time.Second, 100*time.Millisecond,
		"serves once the database is there:\n%s", s.stderr.String())
	st, _ = get("/v1/orgs")
	require.Equal(t, 200, st)
}

// pgTarget is where a test database lives, taken apart from its connection string.
type pgTarget struct {
	user, database, host, port string
	dial                       func() (net.Conn, error)
}

// as is a keyword/value connection string for role on the same server and database.
func (t pgTarget) as(role string) string {
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable", t.host, t.port, role, t.database)
}

// pgconnParse reads a PostgreSQL URL or keyword/value string (the forms pgtest hands out).
func pgconnParse(conn string) (pgTarget, error) {
	kv := map[string]string{"port": "5432"}
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := neturl.Parse(conn)
		if err != nil {
			return pgTarget{}, err
		}
		kv["user"] = u.User.Username()
		kv["dbname"] = strings.TrimPrefix(u.Path, "/")
		if h := u.Hostname(); h != "" {
			kv["host"] = h
		}
		if p := u.Port(); p != "" {
			kv["port"] = p
		}
		for k, v := range u.Query() {
			kv[k] = v[0]
		}
	} else {
		for _, f := range strings.Fields(conn) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = strings.Trim(v, "'")
			}
		}
	}
	host, port := kv["host"], kv["port"]
	t := pgTarget{user: kv["user"], database: kv["dbname"], host: host, port: port}
	if strings.HasPrefix(host, "/") {
		t.dial = func() (net.Conn, error) { return net.Dial("unix", host+"/.s.PGSQL."+port) }
	} else {
		t.dial = func() (net.Conn, error) { return net.Dial("tcp", net.JoinHostPort(host, port)) }
	}
	if t.user == "" || t.database == "" || host == "" {
		return t, fmt.Errorf("cannot take %q apart", conn)
	}
	return t, nil
}

// gateProxy accepts TCP connections and closes them at once until open is called, then
// relays them to the database.
type gateProxy struct {
	addr   string
	isOpen atomic.Bool
}

func newGateProxy(t *testing.T, dial func() (net.Conn, error)) *gateProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	p := &gateProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.isOpen.Load() {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				up, err := dial()
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return p
}

func (p *gateProxy) open() { p.isOpen.Store(true) }

// TestDoctorUnderAPlainRole (issue 18, item 6): privileges were discovered at first use. strata
// doctor, connected as a role with no attributes that owns the database, says what it can
// serve and what each missing feature needs; as a superuser everything is there. serve runs
// the same checks at start and GET /v1/status (admin) shows them.
func TestDoctorUnderAPlainRole(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	target, err := pgconnParse(url)
	require.NoError(t, err)
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	role := fmt.Sprintf("plain_%s_%d", strings.TrimPrefix(target.database, "t_"), time.Now().UnixNano()%1_000_000)
	for _, stmt := range []string{
		`DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN', '` + role + `'); END $$`,
		`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO %I', current_database(), '` + role + `'); END $$`,
		`DO $$ BEGIN EXECUTE format('GRANT USAGE ON SCHEMA strata TO %I', '` + role + `'); EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA strata TO %I', '` + role + `'); END $$`,
	} {
		_, err := admin.Exec(ctx, &db.Query{Name: "role", Text: stmt})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), &db.Query{Name: "drop", Text: `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO CURRENT_USER', current_database()); EXECUTE format('DROP OWNED BY %I', '` + role + `'); EXECUTE format('DROP ROLE %I', '` + role + `'); END $$`})
	})
	doctor := func(conn string) map[string]map[string]any {
		t.Helper()
		out, errOut, err := cliStreams(t, nil, "doctor", "--database-url", conn, "-o", "json")
		require.NoError(t, err, "%s%s", out, errOut)
		var list struct {
			Items []map[string]any `json:"items"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &list), out)
		byFeature := map[string]map[string]any{}
		for _, c := range list.Items {
			byFeature[c["feature"].(string)] = c
		}
		return byFeature
	}
	plain := doctor(target.as(role))
	require.Len(t, plain, 7, "six features and the keys")
	for f, c := range plain {
		switch {
		case strings.HasPrefix(f, "serve"), f == "writes", strings.HasPrefix(f, "Terraform projects"), strings.HasPrefix(f, "encryption keys"):
			require.Equal(t, true, c["ok"], "%s: %v", f, c)
		default:
			require.Equal(t, false, c["ok"], "%s: %v", f, c)
			require.NotEmpty(t, c["needs"], f)
		}
	}
	require.Contains(t, plain["project and Salt credentials (login roles)"]["needs"], "CREATEROLE")
	require.Contains(t, plain["force-unlock of pg clients' locks"]["needs"], "pg_signal_backend")
	require.Contains(t, plain["lock holders' user, address and application"]["needs"], "pg_read_all_stats")
	for f, c := range doctor(url) {
		require.Equal(t, true, c["ok"], "as a superuser, %s: %v", f, c)
	}
}

// TestDiskFullIsA503 (issue 18, item 2): a write that fails for want of disk (SQLSTATE 53100,
// simulated here by triggers that raise it, since filling a disk is not a test) is a 503 with
// reason disk-full, and /readyz turns 503 with that reason: only a write tells when space is
// back, so readiness then probes with one, and is ready again once it succeeds.
func TestDiskFullIsA503(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	token := "strata_" + strings.Repeat("diskFullTokenXY", 3)
	s := startServer(t, []string{"STRATA_BOOTSTRAP_TOKEN=" + token}, "--database-url", url, "--data-dir", dataDir(t))
	ctx := context.Background()
	admin, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	call := func(method, path, body string) (int, string, string) {
		a := callAs(t, s.url, token, method, path, body)
		return a.status, a.retry, a.body
	}
	exec := func(sql string) {
		_, err := admin.Exec(ctx, &db.Query{Name: "t", Text: sql})
		require.NoError(t, err)
	}
	exec(`CREATE FUNCTION strata.test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
	exec(`CREATE TRIGGER test_disk_full BEFORE INSERT ON strata.resources FOR EACH ROW EXECUTE FUNCTION strata.test_disk_full()`)
	exec(`CREATE TRIGGER test_disk_full BEFORE INSERT OR UPDATE ON strata.health_probe FOR EACH ROW EXECUTE FUNCTION strata.test_disk_full()`)

	st, retry, body := call("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	require.Equal(t, 503, st, body)
	require.Contains(t, body, `"reason":"disk-full"`)
	require.Equal(t, "10", retry)
	st, _, body = call("GET", "/readyz", "")
	require.Equal(t, 503, st, body)
	require.Contains(t, body, `"reason":"disk-full"`)

	exec(`DROP TRIGGER test_disk_full ON strata.resources`)
	exec(`DROP TRIGGER test_disk_full ON strata.health_probe`)
	st, _, body = call("GET", "/readyz", "")
	require.Equal(t, 200, st, "ready once a write succeeds again: %s", body)
	st, _, body = call("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	require.Equal(t, 201, st, body)
}

// answer is what callAs got: the status, Retry-After, a problem's reason, and the body.
type answer struct {
	status int
	retry  string
	reason string
	body   string
}

// callAs sends one request to base with token.
func callAs(t *testing.T, base, token, method, path, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &p)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), p.Reason, string(b)}
}
