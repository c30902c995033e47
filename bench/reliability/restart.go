package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/client"
)

// The restart scenario: clients run Terraform's http backend cycle (LOCK, GET, POST with
// serial+1, UNLOCK) in a loop, alternating between the two replicas, while PostgreSQL is
// restarted with `pg_ctl restart -m fast`. A client retries 503s and transport errors with
// a short backoff, as a Terraform run with retries would, and gives a cycle up after
// stepBudget (then releases its lock). Every write answered 2xx is an acknowledged write;
// after the load each must be the workspace's final state or one of its versions.

// stepBudget bounds the retries of one request of a cycle; lockWait bounds how long a
// client waits for a shared workspace held by another client (Terraform's -lock-timeout).
const (
	stepBudget   = 20 * time.Second
	unlockBudget = 60 * time.Second
	lockWait     = 15 * time.Second
)

// ack is one acknowledged write.
type ack struct {
	workspace  string
	serial     int64
	marker     string
	body       []byte
	md5        string
	replica    string
	start, end time.Time
}

type load struct {
	cfg   *config
	p     *proto
	reps  []*replica
	end   time.Time
	mu    sync.Mutex
	acks  []ack
	abort map[string]int // why cycles were given up: "LOCK 503", "POST 409", …
	bad   map[string]int // answers no client should get, "POST 409" …
	badEx []string       // a few examples of them
}

func (l *load) note(m map[string]int, key string) {
	l.mu.Lock()
	m[key]++
	l.mu.Unlock()
}

func (l *load) unexpected(rep *replica, op string, r reply) {
	key := op + " " + statusText(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bad[key]++
	if len(l.badEx) < 5 {
		l.badEx = append(l.badEx, fmt.Sprintf("%s on %s: %s", key, rep.name, snippet(r.body)))
	}
}

func statusText(r reply) string {
	if r.err != nil {
		return "error"
	}
	return fmt.Sprint(r.status)
}

// workspaceOf gives client i its workspace: one of its own, or one shared by shareGroup
// clients (the last cfg.shared clients), where LOCK answers 423 while another holds it.
func (l *load) workspaceOf(i int) string {
	own := l.cfg.clients - l.cfg.shared
	if i < own {
		return fmt.Sprintf("own-%03d", i)
	}
	return fmt.Sprintf("shared-%02d", (i-own)/l.cfg.shareGroup)
}

func (l *load) client(i int) {
	ws := l.workspaceOf(i)
	for iter := 0; time.Now().Before(l.end); iter++ {
		l.cycle(i, iter, ws, l.reps[(i+iter)%len(l.reps)])
	}
}

// cycle is one Terraform run's traffic: LOCK, GET, POST serial+1, UNLOCK.
func (l *load) cycle(i, iter int, ws string, rep *replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := newID()
	info := lockInfo(id, fmt.Sprintf("client-%03d@reliability", i))
	release := func() {
		r := l.p.unlock(ctx, rep, ws, info, time.Now().Add(unlockBudget))
		if r.err != nil || r.status != http.StatusOK {
			l.unexpected(rep, "UNLOCK", r)
		}
	}

	lockUntil := time.Now().Add(lockWait)
	for {
		r := l.p.lock(ctx, rep, ws, info, time.Now().Add(stepBudget))
		if r.err == nil && r.status == http.StatusOK {
			break
		}
		if r.err == nil && r.status == http.StatusLocked && time.Now().Before(lockUntil) {
			sleep(ctx, jitter(40*time.Millisecond))
			continue
		}
		l.note(l.abort, "LOCK "+statusText(r))
		if !r.unavailable() && r.status != http.StatusLocked {
			l.unexpected(rep, "LOCK", r)
		}
		release() // the lock may have been taken although its answer was lost
		return
	}

	g := l.p.get(ctx, rep, ws, time.Now().Add(stepBudget))
	var serial int64
	var lineage string
	switch {
	case g.err == nil && g.status == http.StatusOK:
		var err error
		if serial, lineage, err = stateMeta(g.body); err != nil {
			g.status = 0
			l.unexpected(rep, "GET unreadable", g)
			release()
			return
		}
	case g.err == nil && g.status == http.StatusNotFound:
		lineage = newID()
	default:
		l.note(l.abort, "GET "+statusText(g))
		if !g.unavailable() {
			l.unexpected(rep, "GET", g)
		}
		release()
		return
	}

	marker := fmt.Sprintf("c%03d-i%06d-%s", i, iter, newID()[:8])
	body := stateDoc(serial+1, lineage, marker)
	w := l.p.post(ctx, rep, ws, id, body, time.Now().Add(stepBudget))
	if w.err == nil && w.status == http.StatusOK {
		l.mu.Lock()
		l.acks = append(l.acks, ack{workspace: ws, serial: serial + 1, marker: marker, body: body, md5: md5hex(body),
			replica: rep.name, start: w.start, end: w.end})
		l.mu.Unlock()
	} else {
		l.note(l.abort, "POST "+statusText(w))
		if !w.unavailable() {
			l.unexpected(rep, "POST", w)
		}
	}
	release()
}

// pgWatch is what the restart driver saw of PostgreSQL.
type pgWatch struct {
	hookStart, hookEnd time.Time
	down, up           time.Time // first pg_isready failure, first success after it
	downSeen           bool
	err                error
	readyz             map[string]time.Time // first /readyz 200 of each replica after up
	long               longWatch
}

// longWatch is what became of the locks held across the restart once PostgreSQL was back.
type longWatch struct {
	rekeyed    time.Duration // when every key was held again, after PostgreSQL accepted connections; <0: not within the watch
	silentTrue int           // samples with more locks shown protected than keys held
	unlocked   int           // samples where a lock was shown not locked
	samples    int
	first      sample
	last       sample
}

// watchLong samples the held-across locks (status on B, keys from pg_locks) every 100 ms
// until every key is held again and shown protected, or for 10 s.
func watchLong(ctx context.Context, cfg *config, p *proto, names []string, up time.Time) longWatch {
	lw := longWatch{rekeyed: -1}
	for time.Since(up) < 10*time.Second {
		s := observe(ctx, cfg, p, &cfg.b, names, time.Since(up))
		lw.samples++
		if lw.samples == 1 {
			lw.first = s
		}
		lw.last = s
		if s.keys >= 0 && s.protected > s.keys {
			lw.silentTrue++
		}
		if s.locked < len(names) {
			lw.unlocked++
		}
		if s.keys == len(names) && s.protected == len(names) {
			lw.rekeyed = s.at
			break
		}
		if s.keys < 0 && s.protected == len(names) && time.Since(up) > 3*time.Second {
			break // no psql hook: nothing more to learn than what protected says
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return lw
}

// restartPG runs the restart hook at `at` and watches pg_isready meanwhile.
func restartPG(ctx context.Context, cfg *config, p *proto, reps []*replica, long []string, at time.Time) *pgWatch {
	w := &pgWatch{readyz: map[string]time.Time{}}
	sleep(ctx, time.Until(at))
	w.hookStart = time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, w.err = hook(ctx, cfg.hookPGRestart)
		w.hookEnd = time.Now()
	}()
	isReady := func() bool { _, err := hook(ctx, cfg.hookPGIsReady); return err == nil }
	limit := time.Now().Add(3 * time.Minute)
	hookDone := false
	for time.Now().Before(limit) {
		select {
		case <-done:
			hookDone = true
		default:
		}
		ok := isReady()
		now := time.Now()
		if !ok && !w.downSeen {
			w.down, w.downSeen = now, true
		}
		if ok && (w.downSeen || hookDone) {
			w.up = now
			break
		}
		sleep(ctx, 20*time.Millisecond)
	}
	if !w.downSeen {
		w.down = w.hookStart // the restart was quicker than one probe
	}
	if !w.up.IsZero() && len(long) > 0 {
		longDone := make(chan struct{})
		go func() { defer close(longDone); w.long = watchLong(ctx, cfg, p, long, w.up) }()
		defer func() { <-longDone }()
	}
	<-done
	// Readiness of each replica after PostgreSQL is back (informative).
	for _, rep := range reps {
		for time.Since(w.up) < 60*time.Second {
			r := p.call(ctx, rep, "readyz", http.MethodGet, "/readyz", nil, nil)
			if r.err == nil && r.status == http.StatusOK {
				w.readyz[rep.name] = r.end
				break
			}
			sleep(ctx, 25*time.Millisecond)
		}
	}
	return w
}

func runRestart(ctx context.Context, cfg *config) bool {
	rec := newRecorder()
	l := &load{cfg: cfg, p: newProto(cfg.token, cfg.project, cfg.reqTimeout, rec), reps: []*replica{&cfg.a, &cfg.b},
		abort: map[string]int{}, bad: map[string]int{}}
	start := time.Now()
	l.end = start.Add(cfg.duration)

	// One run per replica holds its lock across the whole load, as a long apply would;
	// it writes and unlocks with its lock ID after the restart.
	var long []heldLock
	var longNames []string
	run := time.Now().Format("150405")
	for _, rep := range l.reps {
		h := heldLock{workspace: fmt.Sprintf("long-%s-%s", run, strings.ToLower(rep.name)), lineage: newID(),
			info: lockInfo(newID(), "long-run@reliability")}
		dl := time.Now().Add(stepBudget)
		if r := l.p.lock(ctx, rep, h.workspace, h.info, dl); r.err != nil || r.status != http.StatusOK {
			return verdict("restart", []string{fmt.Sprintf("LOCK %s on %s: %s %s", h.workspace, rep.name, statusText(r), snippet(r.body))}, "setup failed")
		}
		body := stateDoc(1, h.lineage, "long-before")
		r := l.p.post(ctx, rep, h.workspace, h.info.ID, body, dl)
		if r.err != nil || r.status != http.StatusOK {
			return verdict("restart", []string{fmt.Sprintf("POST %s on %s: %s %s", h.workspace, rep.name, statusText(r), snippet(r.body))}, "setup failed")
		}
		l.acks = append(l.acks, ack{workspace: h.workspace, serial: 1, marker: "long-before", body: body, md5: md5hex(body), replica: rep.name, start: r.start, end: r.end})
		long = append(long, h)
		longNames = append(longNames, h.workspace)
	}

	var wg sync.WaitGroup
	for i := range cfg.clients {
		wg.Add(1)
		go func() { defer wg.Done(); l.client(i) }()
	}
	// /readyz is polled on its own recorder: it is not Terraform traffic.
	pw := restartPG(ctx, cfg, newProto(cfg.token, cfg.project, 5*time.Second, newRecorder()), l.reps, longNames, start.Add(cfg.restartAt))
	wg.Wait()
	loadTime := time.Since(start)

	var failures []string
	longDone := 0
	for i, h := range long {
		rep := l.reps[i]
		body := stateDoc(2, h.lineage, "long-after-"+newID()[:8])
		dl := time.Now().Add(stepBudget)
		w := l.p.post(ctx, rep, h.workspace, h.info.ID, body, dl)
		if w.err != nil || w.status != http.StatusOK {
			failures = append(failures, fmt.Sprintf("the run holding %s across the restart could not write with its lock ID on %s: %s %s", h.workspace, rep.name, statusText(w), snippet(w.body)))
			continue
		}
		l.acks = append(l.acks, ack{workspace: h.workspace, serial: 2, marker: "long-after", body: body, md5: md5hex(body), replica: rep.name, start: w.start, end: w.end})
		if r := l.p.unlock(ctx, rep, h.workspace, h.info, dl); r.err != nil || r.status != http.StatusOK {
			failures = append(failures, fmt.Sprintf("UNLOCK %s on %s: %s %s", h.workspace, rep.name, statusText(r), snippet(r.body)))
			continue
		}
		longDone++
	}
	if pw.err != nil {
		failures = append(failures, "restarting PostgreSQL: "+pw.err.Error())
	}
	if pw.up.IsZero() {
		failures = append(failures, "PostgreSQL did not accept connections again within 3 min")
	}

	// Recovery: each replica's first acknowledged write whose request began after
	// PostgreSQL went down, measured from the moment it accepted connections again.
	recovery := map[string]time.Duration{}
	for _, a := range l.acks {
		if a.start.After(pw.down) && !pw.up.IsZero() {
			d := a.end.Sub(pw.up)
			if cur, ok := recovery[a.replica]; !ok || d < cur {
				recovery[a.replica] = d
			}
		}
	}
	for _, rep := range l.reps {
		d, ok := recovery[rep.name]
		switch {
		case !ok:
			failures = append(failures, fmt.Sprintf("replica %s acknowledged no write after the restart", rep.name))
		case d > cfg.recoveryLimit:
			failures = append(failures, fmt.Sprintf("replica %s wrote again %s after PostgreSQL accepted connections (limit %s)", rep.name, secs(d), secs(cfg.recoveryLimit)))
		}
	}

	// Unavailability seen by clients: 503s and transport errors.
	n503, nErr := rec.count("503"), rec.count("error")
	var first, last time.Time
	for _, t := range rec.unavail {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	if len(rec.odds) > 0 {
		failures = append(failures, fmt.Sprintf("%d answers 5xx other than 503", len(rec.odds)))
	}
	if n := sumMap(l.bad); n > 0 {
		failures = append(failures, fmt.Sprintf("%d answers no Terraform client should get (%s)", n, mapText(l.bad)))
	}

	// Every acknowledged write must be the final state or one of the versions.
	v := verifyAcks(ctx, cfg, l.acks)
	if pw.long.silentTrue > 0 {
		failures = append(failures, fmt.Sprintf("%d samples showed a lock held across the restart protected:true without its advisory key", pw.long.silentTrue))
	}
	failures = append(failures, v.failures...)

	own := cfg.clients - cfg.shared
	sharedWS := (cfg.shared + cfg.shareGroup - 1) / cfg.shareGroup
	window := "none"
	if !first.IsZero() {
		window = fmt.Sprintf("%s (from %+.2f s to %+.2f s of PostgreSQL accepting connections)",
			secs(last.Sub(first)), first.Sub(pw.up).Seconds(), last.Sub(pw.up).Seconds())
	}
	summary := fmt.Sprintf("%d clients (%d on own workspaces, %d sharing %d), %s load, PostgreSQL restarted at %s: "+
		"%d acknowledged writes, %d lost; %d answers 5xx other than 503; %d × 503 + %d transport errors; "+
		"first write after PostgreSQL accepted connections: A %s, B %s (limit %s)",
		cfg.clients, own, cfg.shared, sharedWS, secs(loadTime), secs(cfg.restartAt),
		len(l.acks), v.missing, len(rec.odds), n503, nErr,
		recText(recovery, "A"), recText(recovery, "B"), secs(cfg.recoveryLimit))
	ok := verdict("restart", failures, summary)
	fmt.Printf("  postgres: pg_ctl restart -m fast took %s; pg_isready failed first %+.2f s after it began (observed: %v), accepted connections again %+.2f s after it began\n",
		secs(pw.hookEnd.Sub(pw.hookStart)), pw.down.Sub(pw.hookStart).Seconds(), pw.downSeen, pw.up.Sub(pw.hookStart).Seconds())
	fmt.Printf("  /readyz 200 again after PostgreSQL accepted connections: A %s, B %s\n", readyText(pw, "A"), readyText(pw, "B"))
	fmt.Printf("  unavailability (503 or transport error) window: %s\n", window)
	rekeyed := "not within 10 s"
	if pw.long.rekeyed >= 0 {
		rekeyed = fmt.Sprintf("%+.2f s", pw.long.rekeyed.Seconds())
	}
	fmt.Printf("  locks held across the restart (one per replica): all keys held and shown protected again %s after PostgreSQL accepted connections; "+
		"samples showing protected:true without the key: %d of %d, showing unlocked: %d; runs that wrote and unlocked with their lock ID afterwards: %d/%d\n",
		rekeyed, pw.long.silentTrue, pw.long.samples, pw.long.unlocked, longDone, len(long))
	fmt.Printf("    first sample %s\n    last sample  %s\n", pw.long.first.text(len(longNames)), pw.long.last.text(len(longNames)))
	fmt.Printf("  answers: %s\n", rec.summary())
	fmt.Printf("  cycles given up: %s\n", mapText(l.abort))
	fmt.Printf("  verified: %d workspaces, %d acknowledged writes (%d final states, %d versions read back byte for byte); "+
		"%d workspaces whose final serial is below an acknowledged one; %d serials acknowledged twice\n",
		v.workspaces, len(l.acks), v.final, v.inVersions, v.rolledBack, v.dupSerial)
	for _, e := range l.badEx {
		fmt.Printf("  unexpected: %s\n", e)
	}
	for i, o := range rec.odds {
		if i >= 5 && !cfg.verbose {
			fmt.Printf("  … %d more 5xx\n", len(rec.odds)-i)
			break
		}
		fmt.Printf("  5xx: %s %s %d at %+.2f s of PostgreSQL accepting: %s\n", o.replica, o.op, o.status, o.at.Sub(pw.up).Seconds(), o.body)
	}
	for i, m := range v.missingEx {
		if i >= 5 && !cfg.verbose {
			break
		}
		fmt.Printf("  missing: %s\n", m)
	}
	return ok
}

func recText(m map[string]time.Duration, name string) string {
	d, ok := m[name]
	if !ok {
		return "never"
	}
	return fmt.Sprintf("%+.2f s", d.Seconds())
}

func readyText(pw *pgWatch, name string) string {
	t, ok := pw.readyz[name]
	if !ok {
		return "not within 60 s"
	}
	return fmt.Sprintf("%+.2f s", t.Sub(pw.up).Seconds())
}

func sumMap(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mapText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

type verification struct {
	workspaces, final, inVersions  int
	missing, rolledBack, dupSerial int
	missingEx                      []string
	failures                       []string
}

// verifyAcks reads every workspace's final state and versions (through replica B, then A
// on failure) and finds each acknowledged write there: as the final state's bytes, or as
// a version whose bytes, read back with GET …/versions/{n}, are exactly what was written.
func verifyAcks(ctx context.Context, cfg *config, acks []ack) verification {
	p := newProto(cfg.token, cfg.project, cfg.reqTimeout, newRecorder())
	byWS := map[string][]ack{}
	for _, a := range acks {
		byWS[a.workspace] = append(byWS[a.workspace], a)
	}
	var (
		mu sync.Mutex
		v  verification
		wg sync.WaitGroup
	)
	sem := make(chan struct{}, 8)
	fail := func(s string) { mu.Lock(); v.failures = append(v.failures, s); mu.Unlock() }
	for ws, list := range byWS {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rep := &cfg.b
			deadline := time.Now().Add(time.Minute)
			g := p.get(ctx, rep, ws, deadline)
			if g.err != nil || g.status != http.StatusOK {
				fail(fmt.Sprintf("reading %s: %s %s", ws, statusText(g), snippet(g.body)))
				return
			}
			finalMD5 := md5hex(g.body)
			finalSerial, _, _ := stateMeta(g.body)
			vl := p.retry(ctx, rep, "GET versions", http.MethodGet, p.statePath(ws)+"/versions", nil, nil, deadline)
			var versions struct {
				Items []client.StateVersion `json:"items"`
			}
			if vl.err != nil || vl.status != http.StatusOK || json.Unmarshal(vl.body, &versions) != nil {
				fail(fmt.Sprintf("listing versions of %s: %s %s", ws, statusText(vl), snippet(vl.body)))
				return
			}
			byMD5 := map[string]int64{}
			for _, it := range versions.Items {
				byMD5[it.MD5] = it.N
			}
			var final, inVersions, missing, rolledBack, dup int
			var ex []string
			seen := map[int64]string{}
			var maxSerial int64
			for _, a := range list {
				if m, ok := seen[a.serial]; ok && m != a.md5 {
					dup++
				}
				seen[a.serial] = a.md5
				maxSerial = max(maxSerial, a.serial)
				if a.md5 == finalMD5 {
					final++
					continue
				}
				n, ok := byMD5[a.md5]
				if ok {
					r := p.retry(ctx, rep, "GET version", http.MethodGet, fmt.Sprintf("%s/versions/%d", p.statePath(ws), n), nil, nil, deadline)
					if r.err == nil && r.status == http.StatusOK && bytes.Equal(r.body, a.body) {
						inVersions++
						continue
					}
				}
				missing++
				ex = append(ex, fmt.Sprintf("%s serial %d marker %s (acknowledged by %s at %s)", ws, a.serial, a.marker, a.replica, a.end.Format("15:04:05.000")))
			}
			if finalSerial < maxSerial {
				rolledBack++
			}
			mu.Lock()
			v.workspaces++
			v.final += final
			v.inVersions += inVersions
			v.missing += missing
			v.rolledBack += rolledBack
			v.dupSerial += dup
			v.missingEx = append(v.missingEx, ex...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if v.missing > 0 {
		v.failures = append(v.failures, fmt.Sprintf("%d acknowledged writes are neither a final state nor a version", v.missing))
	}
	if v.rolledBack > 0 {
		v.failures = append(v.failures, fmt.Sprintf("%d workspaces end below a serial they acknowledged", v.rolledBack))
	}
	if v.dupSerial > 0 {
		v.failures = append(v.failures, fmt.Sprintf("%d serials were acknowledged twice with other bytes (a lost update)", v.dupSerial))
	}
	return v
}
