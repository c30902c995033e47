package chaos

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from loopback listeners to upstream servers (one listener
// per upstream) and can cut, delay or hold them. One replica's database traffic goes through
// one Proxy, so a fault on it touches that replica alone.
type Proxy struct {
	listeners []net.Listener
	upstreams []string

	mu          sync.Mutex
	conns       map[*pair]struct{}
	delay       time.Duration
	jitter      time.Duration
	rng         *rand.Rand
	gate        chan struct{} // closed while traffic flows; open (blocking) while blackholed
	loseCommits atomic.Bool
	lostCommits atomic.Int64
	closed      chan struct{}
	wg          sync.WaitGroup
	stopped     bool
}

// pair is one proxied connection: the client's end and the upstream's.
type pair struct{ client, server net.Conn }

// commitComplete is PostgreSQL's CommandComplete message for a COMMIT that committed: type
// 'C', length 11, tag "COMMIT". The server sends it only once the commit is durable (and, with
// a synchronous standby, replicated).
var commitComplete = []byte("C\x00\x00\x00\x0bCOMMIT\x00")

// NewProxy listens on a free loopback port for each upstream address ("host:port") and
// forwards what it accepts there. seed fixes the delay jitter's sequence.
func NewProxy(upstreams []string, seed uint64) (*Proxy, error) {
	p := &Proxy{upstreams: upstreams, conns: map[*pair]struct{}{}, rng: rand.New(rand.NewPCG(seed, 0x6368616f73)),
		gate: make(chan struct{}), closed: make(chan struct{})}
	close(p.gate)
	for range upstreams {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.listeners = append(p.listeners, l)
	}
	for i, l := range p.listeners {
		p.wg.Add(1)
		go p.accept(l, upstreams[i])
	}
	return p, nil
}

// Addrs returns the listen address ("127.0.0.1:port") of each upstream, in NewProxy's order.
func (p *Proxy) Addrs() []string {
	out := make([]string, len(p.listeners))
	for i, l := range p.listeners {
		out[i] = l.Addr().String()
	}
	return out
}

func (p *Proxy) accept(l net.Listener, upstream string) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c, upstream)
	}
}

// serve connects one accepted client to the upstream, once the gate is open: a blackholed
// proxy holds new connections unanswered, as a partition holds a SYN.
func (p *Proxy) serve(client net.Conn, upstream string) {
	defer p.wg.Done()
	if !p.waitOpen() {
		client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", upstream, 2*time.Second)
	if err != nil {
		reset(client) // the server is down: refuse as it would
		return
	}
	pr := &pair{client: client, server: server}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()
	var once sync.Once
	done := func() {
		once.Do(func() {
			client.Close()
			server.Close()
			p.mu.Lock()
			delete(p.conns, pr)
			p.mu.Unlock()
		})
	}
	p.wg.Add(2)
	go p.pump(pr, true, done)
	go p.pump(pr, false, done)
}

// pump copies one direction of pr chunk by chunk; each chunk waits for the gate and the
// current delay before it is written, so a delay keeps the order and a blackhole holds what
// was read.
func (p *Proxy) pump(pr *pair, toServer bool, done func()) {
	defer p.wg.Done()
	defer done()
	src, dst := pr.server, pr.client
	if toServer {
		src, dst = pr.client, pr.server
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !toServer && p.loseCommits.Load() && bytes.Contains(buf[:n], commitComplete) {
			// A COMMIT committed; its answer is lost with the connection.
			p.lostCommits.Add(1)
			reset(pr.client)
			reset(pr.server)
			return
		}
		if n > 0 {
			if !p.waitOpen() {
				return
			}
			if d := p.nextDelay(); d > 0 {
				select {
				case <-time.After(d):
				case <-p.closed:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitOpen blocks while the proxy is blackholed; false when the proxy closed meanwhile.
func (p *Proxy) waitOpen() bool {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return true
	case <-p.closed:
		return false
	}
}

func (p *Proxy) nextDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.delay <= 0 && p.jitter <= 0 {
		return 0
	}
	d := p.delay
	if p.jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(2*p.jitter)+1)) - p.jitter
	}
	return max(d, 0)
}

// Cut resets every connection the proxy holds (TCP RST to both ends, so neither side waits
// for a goodbye) and returns how many it cut. New connections are served as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.conns))
	for pr := range p.conns {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		reset(pr.client)
		reset(pr.server)
	}
	return len(pairs)
}

// LoseCommitAnswers, while on, drops the server's answer to every COMMIT that committed and
// resets that connection (RST to both ends): the write is durable and the client cannot know
// it — the lost answer strata must report as an unknown outcome, never as a failure. The
// answers before the COMMIT's, in earlier chunks, pass.
func (p *Proxy) LoseCommitAnswers(on bool) { p.loseCommits.Store(on) }

// LostCommits counts the COMMIT answers LoseCommitAnswers dropped.
func (p *Proxy) LostCommits() int64 { return p.lostCommits.Load() }

// upstreamPorts are the local ports of the proxy's connections to its upstreams: how
// PostgreSQL's pg_stat_activity.client_port names the replica's backends.
func (p *Proxy) upstreamPorts() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int32
	for pr := range p.conns {
		if a, ok := pr.server.LocalAddr().(*net.TCPAddr); ok {
			out = append(out, int32(a.Port))
		}
	}
	return out
}

// Conns is the number of connections the proxy holds now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// SetDelay delays every chunk forwarded from now on by base ± jitter (uniform); zero both to
// stop delaying.
func (p *Proxy) SetDelay(base, jitter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.jitter = base, jitter
}

// Blackhole stops forwarding: bytes read are held, new connections are accepted and held.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already blackholed
	}
}

// Heal undoes Blackhole, SetDelay and LoseCommitAnswers: what was held is forwarded, in
// order.
func (p *Proxy) Heal() {
	p.loseCommits.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.jitter = 0, 0
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Close stops listening, resets every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	close(p.closed)
	p.mu.Unlock()
	for _, l := range p.listeners {
		l.Close()
	}
	p.Cut()
	p.wg.Wait()
}

// reset closes c with SO_LINGER 0, which sends an RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
