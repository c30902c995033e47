package chaos

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/pgembed"
)

//go:embed chaos.sql
var sqlFiles embed.FS

var queries = db.MustParseQueries(sqlFiles, "chaos.sql")

// pgNode is one PostgreSQL server: its data directory and port never change, its role
// (primary or standby) does, at a promotion.
type pgNode struct {
	name string // pg0, pg1
	data string
	port int
	log  string
}

func (n *pgNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// url is a direct URL of the node's postgres database for the package's own statements;
// application_name "chaos" keeps them out of TerminateBackends' way.
func (n *pgNode) url() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&connect_timeout=5&application_name=chaos", n.addr())
}

// postgres is the primary and, optionally, its synchronous standby.
type postgres struct {
	bin  string
	root string
	cred *syscall.Credential
	log  func(format string, args ...any)

	// mu serializes the faults that change PostgreSQL itself (stop/start, promotion).
	mu      sync.Mutex
	nodes   []*pgNode
	primary int // index into nodes
	// down: the primary is stopped (PGStop) or, after a promotion, the old primary is.
	down bool
	// standbyDown: the standby is stopped (StopStandby).
	standbyDown bool
}

// baseConf is every node's configuration: durable (fsync, full page writes, synchronous
// commit: what a deployment runs with), loopback only, no Unix socket (its path could exceed
// the 107-byte limit under a long Options.Dir), streaming replication allowed. node.conf,
// included last, holds what differs per node: the port and synchronous_standby_names.
const baseConf = `
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = on
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_senders = 8
hot_standby = on
wal_sender_timeout = 5s
wal_receiver_status_interval = 1s
wal_retrieve_retry_interval = 200ms
max_connections = 300
shared_buffers = 32MB
log_line_prefix = '%m [%p] %a '
include 'node.conf'
`

// newPostgresTools finds PostgreSQL's programs and the user that runs them (the postgres
// user when this process is root, as PostgreSQL refuses to run as root).
func newPostgresTools(root string) (*postgres, error) {
	bin, err := pgembed.FindBinaries()
	if err != nil {
		return nil, err
	}
	p := &postgres{bin: bin, root: root}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("as root, PostgreSQL runs as the postgres user (Debian's postgresql package creates it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return p, nil
}

func startPostgres(ctx context.Context, root string, standby bool, logf func(string, ...any)) (_ *postgres, err error) {
	p, err := newPostgresTools(root)
	if err != nil {
		return nil, err
	}
	p.log = logf
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if p.cred != nil {
		if err := os.Chown(root, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return nil, err
		}
	}
	n := 1
	if standby {
		n = 2
	}
	for i := range n {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		name := "pg" + strconv.Itoa(i)
		p.nodes = append(p.nodes, &pgNode{name: name, data: filepath.Join(root, name), port: port, log: filepath.Join(root, name+".log")})
	}
	defer func() {
		if err != nil {
			p.stop(context.WithoutCancel(ctx))
		}
	}()
	prim := p.nodes[0]
	if _, err := p.run(ctx, "initdb", "-D", prim.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, err
	}
	if err := appendFile(filepath.Join(prim.data, "postgresql.conf"), baseConf); err != nil {
		return nil, err
	}
	if err := appendFile(filepath.Join(prim.data, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 trust\n"); err != nil {
		return nil, err
	}
	if err := p.writeNodeConf(prim, false); err != nil {
		return nil, err
	}
	if err := p.startNode(ctx, prim); err != nil {
		return nil, err
	}
	if standby {
		if err := p.makeStandby(ctx, p.nodes[1], prim); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// writeNodeConf writes node.conf: the node's port and whether commits wait for a standby.
func (p *postgres) writeNodeConf(n *pgNode, syncStandby bool) error {
	names := ""
	if syncStandby {
		names = "*"
	}
	return p.writeFile(filepath.Join(n.data, "node.conf"), fmt.Sprintf("port = %d\nsynchronous_standby_names = '%s'\n", n.port, names))
}

// makeStandby copies primary into n with pg_basebackup, starts n streaming from it, and makes
// it the primary's synchronous standby; it returns once the primary reports it so.
func (p *postgres) makeStandby(ctx context.Context, n, primary *pgNode) error {
	if err := os.RemoveAll(n.data); err != nil {
		return err
	}
	if _, err := p.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", n.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	// The copy brought the primary's node.conf. A standby waits for no standby of its own, and
	// once promoted it has none until Heal makes one (as a manager such as Patroni would).
	if err := p.writeNodeConf(n, false); err != nil {
		return err
	}
	if err := p.startNode(ctx, n); err != nil {
		return err
	}
	if err := p.writeNodeConf(primary, true); err != nil {
		return err
	}
	if _, err := p.run(ctx, "pg_ctl", "-D", primary.data, "reload"); err != nil {
		return err
	}
	return p.waitSync(ctx)
}

func (p *postgres) startNode(ctx context.Context, n *pgNode) error {
	_, err := p.run(ctx, "pg_ctl", "-D", n.data, "-l", n.log, "-w", "-t", "120", "start")
	return err
}

func (p *postgres) stopNode(ctx context.Context, n *pgNode, mode string) error {
	if _, err := os.Stat(filepath.Join(n.data, "postmaster.pid")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := p.run(ctx, "pg_ctl", "-D", n.data, "-m", mode, "-w", "-t", "120", "stop")
	return err
}

// primaryNode is the node that takes writes now.
func (p *postgres) primaryNode() *pgNode { return p.nodes[p.primary] }

// standbyNode is the synchronous standby, nil without one.
func (p *postgres) standbyNode() *pgNode {
	if len(p.nodes) < 2 {
		return nil
	}
	return p.nodes[1-p.primary]
}

// stopPrimary stops the primary with pg_ctl stop -m mode; startPrimary starts it again.
func (p *postgres) stopPrimary(ctx context.Context, mode string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	return p.stopNode(ctx, p.primaryNode(), mode)
}

func (p *postgres) startPrimary(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return nil
	}
	if err := p.startNode(ctx, p.primaryNode()); err != nil {
		return err
	}
	p.down = false
	if p.standbyNode() == nil || p.standbyDown {
		return nil
	}
	// Until the standby has reconnected every COMMIT waits for it: the cluster is whole only
	// once it streams again.
	return p.waitSync(ctx)
}

// waitSync waits until the primary has its synchronous standby streaming.
func (p *postgres) waitSync(ctx context.Context) error {
	return p.waitFor(ctx, p.primaryNode(), "a synchronous standby streaming", func(d *db.DB) (bool, error) {
		var n int
		err := d.QueryRow(ctx, queries.Get("SyncStandbys")).Scan(&n)
		return n == 1, err
	})
}

// promote crashes the primary (-m immediate) and promotes the standby; it returns once the
// new primary accepts writes.
func (p *postgres) promote(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb := p.standbyNode()
	if sb == nil {
		return errors.New("promote: the cluster has no standby (Options.Standby)")
	}
	if p.down || p.standbyDown {
		return errors.New("promote: the primary or the standby is stopped (a PGStop, Promote or StopStandby fault is active)")
	}
	if err := p.stopNode(ctx, p.primaryNode(), "immediate"); err != nil {
		return err
	}
	p.down = true // the old primary, until heal rebuilds it as a standby
	if _, err := p.run(ctx, "pg_ctl", "-D", sb.data, "-w", "-t", "120", "promote"); err != nil {
		return err
	}
	p.primary = 1 - p.primary
	return p.waitFor(ctx, sb, "the promoted standby to accept writes", func(d *db.DB) (bool, error) {
		var rec bool
		err := d.QueryRow(ctx, queries.Get("InRecovery")).Scan(&rec)
		return !rec, err
	})
}

// rebuildStandby makes the stopped old primary a synchronous standby of the new one.
func (p *postgres) rebuildStandby(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return nil
	}
	if err := p.makeStandby(ctx, p.standbyNode(), p.primaryNode()); err != nil {
		return err
	}
	p.down = false
	return nil
}

// terminate ends every backend on the primary connected from one of ports (the replicas'
// proxies' ends) and returns how many.
func (p *postgres) terminate(ctx context.Context, ports []int32) (int, error) {
	d, err := p.open(ctx, p.current())
	if err != nil {
		return 0, err
	}
	defer d.Close()
	var n int
	err = d.QueryRow(ctx, queries.Get("TerminateProxiedBackends"), ports).Scan(&n)
	return n, err
}

// transactions counts strata's open write or idle-in-transaction transactions on the primary.
func (p *postgres) transactions(ctx context.Context) (int, error) {
	d, err := p.open(ctx, p.current())
	if err != nil {
		return 0, err
	}
	defer d.Close()
	var n int
	err = d.QueryRow(ctx, queries.Get("StrataTransactions"), "strata%").Scan(&n)
	return n, err
}

// stopStandby stops the synchronous standby (-m fast); startStandby starts it again and waits
// until it is the synchronous standby once more.
func (p *postgres) stopStandby(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb := p.standbyNode()
	if sb == nil {
		return errors.New("stop standby: the cluster has no standby (Options.Standby)")
	}
	if p.down {
		return errors.New("stop standby: a PGStop or Promote fault is active")
	}
	p.standbyDown = true
	return p.stopNode(ctx, sb, "fast")
}

func (p *postgres) startStandby(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.standbyDown {
		return nil
	}
	sb := p.standbyNode()
	if err := p.startNode(ctx, sb); err != nil {
		return err
	}
	p.standbyDown = false
	return p.waitSync(ctx)
}

// current is the primary, read under the lock.
func (p *postgres) current() *pgNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primaryNode()
}

// open connects one connection to n.
func (p *postgres) open(ctx context.Context, n *pgNode) (*db.DB, error) {
	return db.Open(ctx, db.Options{URL: n.url(), MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
}

// waitFor polls cond on n until it holds (a minute at most).
func (p *postgres) waitFor(ctx context.Context, n *pgNode, what string, cond func(*db.DB) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if d, err := p.open(ctx, n); err == nil {
			ok, err := cond(d)
			d.Close()
			if ok && err == nil {
				return nil
			}
			last = err
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s on %s: %w (last error: %v)", what, n.name, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// directURL is the URL a client without a proxy uses: every node, the writable one chosen.
func (p *postgres) directURL() string {
	return multiHostURL(p.addrs())
}

func (p *postgres) addrs() []string {
	out := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = n.addr()
	}
	return out
}

// multiHostURL is a URL of the postgres database on hosts, choosing the writable one.
func multiHostURL(hosts []string) string {
	u := "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&connect_timeout=2"
	if len(hosts) > 1 {
		u += "&target_session_attrs=read-write"
	}
	return u
}

// stop stops every node at once (-m immediate: nothing of them is needed any more).
func (p *postgres) stop(ctx context.Context) error {
	var errs []error
	for _, n := range p.nodes {
		if err := p.stopNode(ctx, n, "immediate"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// run runs a PostgreSQL program as the user PostgreSQL runs as.
func (p *postgres) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.root
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// writeFile writes a file PostgreSQL owns.
func (p *postgres) writeFile(path, text string) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	if p.cred != nil {
		return os.Chown(path, int(p.cred.Uid), int(p.cred.Gid))
	}
	return nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freePort asks the kernel for a free loopback port. Another process may take it before it
// is used; on this test machine that is rare enough.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
