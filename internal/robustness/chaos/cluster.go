package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure Start.
type Options struct {
	// Replicas is the number of strata replicas; 3 when zero.
	Replicas int
	// Standby adds a synchronous streaming standby, needed by Promote.
	Standby bool
	// Binary is the strata binary the replicas run (see BuildStrata).
	Binary string
	// Dir holds PostgreSQL's and the replicas' directories and logs, and is kept after Stop;
	// empty: a temporary directory that Stop removes.
	Dir string
	// Log receives the replicas' log lines and the faults' events; nil discards them.
	Log io.Writer
	// Args are appended to every replica's `strata serve` arguments; Env is added to its
	// environment (after this process's own).
	Args []string
	Env  []string
	// Seed fixes the proxies' delay jitter.
	Seed uint64
	// ClientProxy puts a TCP proxy in front of every replica too: Replica.URL then goes
	// through it (Replica.DirectURL does not), and CutClients can reset the clients'
	// connections — in-flight requests lose their answers, watch streams end mid-event —
	// while the replica runs on.
	ClientProxy bool
}

// Cluster is PostgreSQL (and its standby) and the strata replicas on it.
type Cluster struct {
	opts     Options
	dir      string
	ownDir   bool
	token    string
	keyFile  string
	pg       *postgres
	replicas []*Replica
	log      *lineLog

	stopOnce sync.Once
	stopErr  error
}

// Start starts PostgreSQL and the replicas and returns once every replica is ready. On error
// everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Binary == "" {
		return nil, errors.New("chaos: Options.Binary names no strata binary (see BuildStrata)")
	}
	if opts.Replicas == 0 {
		opts.Replicas = 3
	}
	c := &Cluster{opts: opts, dir: opts.Dir, log: &lineLog{w: opts.Log}}
	if c.dir == "" {
		removeLeftovers(ctx, os.TempDir())
		if c.dir, err = os.MkdirTemp("", ownDirPrefix+"*"); err != nil {
			return nil, err
		}
		c.ownDir = true
		if err := writeOwner(c.dir); err != nil {
			_ = os.RemoveAll(c.dir)
			return nil, err
		}
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	// As root PostgreSQL runs as the postgres user, which must traverse this directory.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	c.token = "strata_" + randomText(32)
	c.keyFile = filepath.Join(c.dir, "encryption-key")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(c.keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if c.pg, err = startPostgres(ctx, filepath.Join(c.dir, "pg"), opts.Standby, c.logf); err != nil {
		return nil, fmt.Errorf("chaos: start PostgreSQL: %w", err)
	}
	for i := range opts.Replicas {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		proxy, err := NewProxy(c.pg.addrs(), opts.Seed+uint64(i))
		if err != nil {
			return nil, err
		}
		r := &Replica{Index: i, c: c, port: port, proxy: proxy, dataDir: filepath.Join(c.dir, "replica"+strconv.Itoa(i))}
		if opts.ClientProxy {
			if r.front, err = NewProxy([]string{r.addr()}, opts.Seed+1000+uint64(i)); err != nil {
				proxy.Close()
				return nil, err
			}
		}
		if err := os.MkdirAll(r.dataDir, 0o755); err != nil {
			return nil, err
		}
		c.replicas = append(c.replicas, r)
	}
	// Replica 0 first, alone, with the bootstrap token: it migrates the schema and creates
	// the token exactly once. Then the others together.
	if err := c.replicas[0].start(ctx, true); err != nil {
		return nil, err
	}
	errs := make([]error, len(c.replicas))
	var wg sync.WaitGroup
	for _, r := range c.replicas[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r.Index] = r.start(ctx, false)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Replicas are the strata replicas, by Index.
func (c *Cluster) Replicas() []*Replica { return c.replicas }

// AdminToken is the admin token every replica accepts.
func (c *Cluster) AdminToken() string { return c.token }

// DatabaseURL is a direct URL of strata's database (the "postgres" database, schema strata),
// not through any proxy: every server listed, the writable one chosen.
func (c *Cluster) DatabaseURL() string { return c.pg.directURL() }

// PrimaryURL is a direct single-host URL of the current primary, for clients that take one
// host only (lib/pq, Terraform's pg backend); it changes at a promotion.
func (c *Cluster) PrimaryURL() string { return multiHostURL([]string{c.pg.current().addr()}) }

// WaitIdle waits until no strata backend holds a transaction that wrote (or sits idle in
// one) on the primary, three checks in a row 100 ms apart: a drain before ground truth is
// read, since a request its client gave up on may still commit. Without a deadline in ctx it
// waits a minute at most.
func (c *Cluster) WaitIdle(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	quiet := 0
	var last error
	for quiet < 3 {
		n, err := c.pg.transactions(ctx)
		switch {
		case err != nil:
			quiet, last = 0, err
		case n == 0:
			quiet++
		default:
			quiet, last = 0, fmt.Errorf("%d strata transactions open", n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: wait for idle: %w (%v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// Dir is the directory holding everything of the cluster.
func (c *Cluster) Dir() string { return c.dir }

// WaitReady waits until every replica runs and answers /readyz?writes=true with 200; without
// a deadline in ctx it waits two minutes at most.
func (c *Cluster) WaitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	errs := make([]error, len(c.replicas))
	var wg sync.WaitGroup
	for i, r := range c.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.waitReady(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stop stops everything (see the package doc). Calls after the first return its result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		for _, r := range c.replicas {
			r.proxy.Heal()
			if r.front != nil {
				r.front.Heal()
			}
		}
		var wg sync.WaitGroup
		for _, r := range c.replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.stop()
			}()
		}
		wg.Wait()
		for _, r := range c.replicas {
			r.proxy.Close()
			if r.front != nil {
				r.front.Close()
			}
		}
		if c.pg != nil {
			if err := c.pg.stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if c.ownDir {
			if err := os.RemoveAll(c.dir); err != nil {
				errs = append(errs, err)
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

func (c *Cluster) logf(format string, args ...any) {
	c.log.line("chaos: " + fmt.Sprintf(format, args...))
}

// Replica is one `strata serve` process.
type Replica struct {
	// Index is the replica's place in Cluster.Replicas.
	Index int

	c       *Cluster
	port    int
	proxy   *Proxy
	front   *Proxy // the client proxy, nil without Options.ClientProxy
	dataDir string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd exited
	tail   *tailBuffer
	starts int
}

// URL is the replica's HTTP base URL, the same across restarts: through its client proxy
// with Options.ClientProxy, else DirectURL.
func (r *Replica) URL() string {
	if r.front != nil {
		return "http://" + r.front.Addrs()[0]
	}
	return r.DirectURL()
}

// DirectURL is the replica's own HTTP base URL, never through a proxy.
func (r *Replica) DirectURL() string { return "http://" + r.addr() }

// ClientProxy is the proxy in front of the replica, nil without Options.ClientProxy.
func (r *Replica) ClientProxy() *Proxy { return r.front }

func (r *Replica) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// DatabaseURL is the URL the replica connects with: through its proxy.
func (r *Replica) DatabaseURL() string { return multiHostURL(r.proxy.Addrs()) }

// Proxy is the proxy between the replica and PostgreSQL.
func (r *Replica) Proxy() *Proxy { return r.proxy }

// Pid is the process id of the running replica, 0 when it is not running.
func (r *Replica) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.exited() {
		return 0
	}
	return r.cmd.Process.Pid
}

// exited reports whether the last process exited; r.mu held.
func (r *Replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// start runs the replica and waits until it is ready.
func (r *Replica) start(ctx context.Context, bootstrap bool) error {
	r.mu.Lock()
	if r.cmd != nil && !r.exited() {
		r.mu.Unlock()
		return r.waitReady(ctx)
	}
	args := []string{"serve", "--listen", r.addr(), "--database-url", r.DatabaseURL(), "--data-dir", r.dataDir,
		"--encryption-key-file", r.c.keyFile}
	args = append(args, r.c.opts.Args...)
	cmd := exec.Command(r.c.opts.Binary, args...)
	cmd.Env = append(os.Environ(), r.c.opts.Env...)
	if bootstrap {
		cmd.Env = append(cmd.Env, "STRATA_BOOTSTRAP_TOKEN="+r.c.token)
	}
	r.tail = &tailBuffer{max: 64 << 10}
	prefix := fmt.Sprintf("replica %d: ", r.Index)
	cmd.Stdout = &prefixWriter{log: r.c.log, prefix: prefix, tail: r.tail}
	cmd.Stderr = cmd.Stdout
	// A replica must not outlive the process that drives it (a killed test run).
	cmd.SysProcAttr = replicaProcAttr()
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	done := make(chan struct{})
	r.cmd, r.done = cmd, done
	r.starts++
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return r.waitReady(ctx)
}

// Restart starts the replica again (after Kill9, or after it exited) with the same binary,
// arguments and port, and waits until it is ready; a running replica is only waited for.
func (r *Replica) Restart(ctx context.Context) error { return r.start(ctx, false) }

// Kill9 sends SIGKILL and waits for the process to exit.
func (r *Replica) Kill9() error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("replica %d: still running 30s after SIGKILL", r.Index)
	}
}

// Pause stops the replica with SIGSTOP: it keeps its connections and its port, and answers
// nothing, until Resume (SIGCONT).
func (r *Replica) Pause() error { return r.signal(syscall.SIGSTOP) }

// Resume continues a paused replica; a replica that is not running (killed meanwhile) is
// left alone.
func (r *Replica) Resume() error {
	if r.Pid() == 0 {
		return nil
	}
	return r.signal(syscall.SIGCONT)
}

func (r *Replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.exited() {
		return fmt.Errorf("replica %d is not running", r.Index)
	}
	return r.cmd.Process.Signal(sig)
}

// stop sends SIGTERM (and SIGCONT, should it be paused) and, after 15 s, SIGKILL.
func (r *Replica) stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitReady polls /readyz?writes=true until it answers 200, the process exits or ctx ends.
func (r *Replica) waitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	r.mu.Lock()
	done, tail := r.done, r.tail
	r.mu.Unlock()
	if done == nil {
		return fmt.Errorf("replica %d: not started", r.Index)
	}
	last := ""
	for {
		select {
		case <-done:
			return fmt.Errorf("replica %d exited:\n%s", r.Index, tail.String())
		default:
		}
		status, err := probe(ctx, r.addr(), "/readyz?writes=true")
		if err == nil && status == 200 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "status " + strconv.Itoa(status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %d not ready (%s): %w; its log ends:\n%s", r.Index, last, ctx.Err(), tail.String())
		case <-done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probe sends one GET and returns the status. It speaks HTTP/1.1 over a plain connection:
// this package is not an HTTP layer (internal/archtest keeps net/http to those), and a status
// line is all readiness needs.
func probe(ctx context.Context, addr, path string) (int, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, addr); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return 0, fmt.Errorf("not an HTTP status line: %q", line)
	}
	return strconv.Atoi(f[1])
}

// lineLog writes whole lines to a shared writer, one at a time.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLog) line(s string) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, strings.TrimRight(s, "\n")+"\n")
}

// prefixWriter splits a process's output into lines for the log, each with a prefix, and
// keeps the tail for error messages.
type prefixWriter struct {
	log    *lineLog
	prefix string
	tail   *tailBuffer
	mu     sync.Mutex
	part   []byte
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.tail.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.log.line(w.prefix + string(w.part[:i]))
		w.part = w.part[i+1:]
	}
	return len(b), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// randomText is n random base64url characters.
func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// BuildStrata builds cmd/strata with `go build` into dir and returns the binary's path; tags
// are build tags (e.g. "sabotage" for a control build). It runs in the current directory,
// which must lie inside strata's module (a test's working directory does).
func BuildStrata(ctx context.Context, dir string, tags ...string) (string, error) {
	name := "strata"
	if len(tags) > 0 {
		name += "-" + strings.Join(tags, "-")
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "github.com/stratahq/strata/cmd/strata")
	cmd := exec.CommandContext(ctx, "go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, b)
	}
	return out, nil
}
