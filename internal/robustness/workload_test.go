//go:build robustness

package robustness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratahq/strata/internal/db"
)

// The workload: clients that each issue a random mix of operations through strata's HTTP
// API (and, for Terraform locks, through the pg backend's own SQL), every one recorded by a
// Recorder; one watcher per replica; a lister paging through lists. A phase is one history:
// its own keys (names carry the phase's prefix), one fault at most, checked on its own.

// phase is one recorded history and what the clients need to produce it.
type phase struct {
	name     string
	prefix   string // DNS-label prefix of its orgs and nodes
	project  string // its Terraform project (a schema name)
	replicas []string
	token    string
	dbURL    string
	db       *db.DB
	rec      *Recorder
	rng      *rand.Rand
	rngMu    sync.Mutex
	http     *http.Client
	timeout  time.Duration // per request; past it the outcome is unknown
	// bulkApplies: the mover client also bulk-applies (-robustness.bulk).
	bulkApplies bool

	objects    []string // org names
	nodes      []string // node names (pillar rows node/<name>/r)
	nodesOrg   string   // the nodes' org
	group      string   // a group of nodesOrg whose static members the member clients change
	awayOrg    string   // the other org movers move to
	movers     []string // nodes that move between nodesOrg and awayOrg (the org-filtered node watch)
	workspaces []string // the project's workspaces, a few lock clients each (per-key concurrency stays small)
	stateIDs   []int64  // each workspace's advisory key

	serial atomic.Int64
	marks  atomic.Int64

	mu         sync.Mutex
	statusBad  []Violation
	streams    []WatchStream
	pages      []ListPage
	bulk       []BulkApply
	clientsRun atomic.Int64
}

func (p *phase) intn(n int) int {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.IntN(n)
}

func (p *phase) marker() string { return fmt.Sprintf("%s-%d", p.prefix, p.marks.Add(1)) }

// answer is an HTTP response as the workload needs it.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// do sends one request to replica r with the phase's per-request timeout and the given
// request id.
func (p *phase) do(ctx context.Context, r int, method, path, reqID string, body []byte, hdr map[string]string) answer {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.replicas[r]+path, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if reqID != "" {
		req.Header.Set("X-Request-Id", reqID)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{status: resp.StatusCode, err: err}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// finish classifies an answer into op and records it; a status strata may not give is a
// violation of its own.
func (p *phase) finish(op *Op, a answer) {
	out, bad := Classify(a.status, a.body, a.err)
	op.Outcome, op.Status = out, a.status
	if a.err != nil {
		op.Err = a.err.Error()
	}
	if bad != "" {
		p.mu.Lock()
		p.statusBad = append(p.statusBad, Violation{Check: "status", Key: op.Key, Message: bad, History: []string{op.String()}})
		p.mu.Unlock()
	}
	p.rec.End(op)
	if a.err != nil {
		time.Sleep(20 * time.Millisecond) // a replica that is down is not hammered
	}
}

type objectJSON struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func parseRV(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

const markerAnnotation = "robustness/op"
const colorLabel = "robustness/color"

// objectClient writes and reads the phase's orgs: create, PUT with and without a
// resourceVersion precondition, merge PATCH of labels and the marker annotation (with and
// without one), DELETE with and without one, GET.
func (p *phase) objectClient(ctx context.Context, replica int) {
	client := p.rec.NewClient()
	known := map[string]int64{}
	for ctx.Err() == nil {
		name := p.objects[p.intn(len(p.objects))]
		key := ObjectKey("Org", "", name)
		m := p.marker()
		op := &Op{Client: client, Family: "object", Key: key, Replica: replica, RequestID: "rb-" + m}
		body := func(rv int64) []byte {
			o := map[string]any{"kind": "Org", "metadata": map[string]any{"name": name,
				"labels":      map[string]string{colorLabel: []string{"red", "blue"}[p.intn(2)]},
				"annotations": map[string]string{markerAnnotation: m}}, "spec": map[string]any{}}
			if rv != 0 {
				o["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatInt(rv, 10)
			}
			b, _ := json.Marshal(o)
			return b
		}
		var a answer
		path := "/v1/orgs/" + name
		switch r := p.intn(100); {
		case r < 15:
			op.Kind, op.Marker = "create", m
			p.rec.Begin(op)
			a = p.do(ctx, replica, "POST", "/v1/orgs", op.RequestID, body(0), nil)
		case r < 32:
			op.Kind, op.Marker, op.PrecondRV = "put", m, known[name]
			if op.PrecondRV == 0 {
				op.PrecondRV = 1 // a version that is never current: a 404 or a 409
			}
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PUT", path, op.RequestID, body(op.PrecondRV), nil)
		case r < 40:
			op.Kind, op.Marker = "put", m
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PUT", path, op.RequestID, body(0), nil)
		case r < 58:
			op.Kind, op.Marker = "patch", m
			meta := map[string]any{"labels": map[string]any{colorLabel: []string{"red", "blue"}[p.intn(2)]},
				"annotations": map[string]any{markerAnnotation: m}}
			if p.intn(2) == 0 && known[name] != 0 {
				op.PrecondRV = known[name]
				meta["resourceVersion"] = strconv.FormatInt(op.PrecondRV, 10)
			}
			b, _ := json.Marshal(map[string]any{"metadata": meta})
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PATCH", path, op.RequestID, b, map[string]string{"Content-Type": "application/merge-patch+json"})
		case r < 66 && known[name] != 0:
			op.Kind, op.PrecondRV = "delete", known[name]
			p.rec.Begin(op)
			a = p.do(ctx, replica, "DELETE", path+"?resourceVersion="+strconv.FormatInt(op.PrecondRV, 10), op.RequestID, nil, nil)
		case r < 68:
			op.Kind = "delete"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "DELETE", path, op.RequestID, nil, nil)
		default:
			op.Kind = "get"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "GET", path, op.RequestID, nil, nil)
		}
		if a.err == nil && a.status/100 == 2 && len(a.body) > 0 {
			var o objectJSON
			if json.Unmarshal(a.body, &o) == nil {
				op.RV = parseRV(o.Metadata.ResourceVersion)
				if op.Kind == "get" {
					op.Exists, op.ReadMarker = true, o.Metadata.Annotations[markerAnnotation]
				}
				known[name] = op.RV
			}
		}
		if op.Kind == "delete" && a.err == nil && a.status/100 == 2 {
			op.RV = 0 // a 204 has no body; the version of a deletion comes from the log
			delete(known, name)
		}
		if a.status == 404 {
			delete(known, name)
		}
		p.finish(op, a)
		if op.Outcome == Unknown {
			client = p.rec.NewClient()
		}
	}
}

// pillarClient writes and reads one pillar row per node: PUT with and without If-Match,
// GET of the row, and strict renders of the node's merged pillar (Cache-Control: no-cache),
// which hold exactly the row since nothing else applies to the node.
//
// Client i works on two nodes, i and i+1 (mod the node count), so that each row has at most
// twice (pillar clients / nodes) clients: per-key concurrency bounds the Porcupine check
// (a 4×128 run whose clients picked any node had 20 operations of one row in flight at once
// and its check did not finish in 5 minutes).
func (p *phase) pillarClient(ctx context.Context, replica, i int) {
	client := p.rec.NewClient()
	known := map[string]string{}
	var probe []string // a read-your-writes probe's remaining steps, on probeNode
	probeNode := ""
	mine := []string{p.nodes[i%len(p.nodes)], p.nodes[(i+1)%len(p.nodes)]}
	for ctx.Err() == nil {
		node := mine[p.intn(2)]
		var step string
		switch r := p.intn(100); {
		case len(probe) > 0:
			node, step, probe = probeNode, probe[0], probe[1:]
		case r < 25:
			step = "put"
		case r < 50 && known[node] != "":
			step = "put-if"
		case r < 75:
			step = "get"
		case r < 88:
			step = "render"
		case r < 94:
			// A read-your-writes probe: a cached render (which fills this replica's cache),
			// a write, and at once a cached render on the same replica, which must show it.
			step, probe, probeNode = "cached", []string{"put", "cached"}, node
		default:
			step = "cached"
		}
		key := "node/" + node + "/r"
		m := p.marker()
		op := &Op{Client: client, Family: "pillar", Key: key, Replica: replica, RequestID: "rb-" + m}
		rowPath := "/v1/nodes/" + node + "/pillars/r"
		var a answer
		switch step {
		case "put":
			op.Kind, op.Marker = "put", m
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PUT", rowPath, op.RequestID, []byte(`{"robustness_op":"`+m+`"}`), nil)
		case "put-if":
			op.Kind, op.Marker, op.IfMatch = "put", m, known[node]
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PUT", rowPath, op.RequestID, []byte(`{"robustness_op":"`+m+`"}`), map[string]string{"If-Match": op.IfMatch})
		case "get":
			op.Kind = "get"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "GET", rowPath, op.RequestID, nil, nil)
		case "render":
			op.Kind = "render"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "GET", "/v1/nodes/"+node+"/pillar", op.RequestID, nil, map[string]string{"Cache-Control": "no-cache"})
		case "cached":
			// A cached render: checked by CheckCachedRenders, not as a linearizable read.
			op.Kind, op.Family = "render", "cached"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "GET", "/v1/nodes/"+node+"/pillar", op.RequestID, nil, nil)
		}
		if a.err == nil && a.status/100 == 2 {
			switch op.Kind {
			case "put":
				op.ETag = a.header.Get("ETag")
				known[node] = op.ETag
			case "get":
				var row struct {
					Data map[string]any `json:"data"`
				}
				if json.Unmarshal(a.body, &row) == nil {
					op.Exists = true
					op.ReadMarker, _ = row.Data["robustness_op"].(string)
					op.ETag = a.header.Get("ETag")
					known[node] = op.ETag
				}
			case "render":
				var data map[string]any
				if json.Unmarshal(a.body, &data) == nil {
					op.ReadMarker, op.Exists = data["robustness_op"].(string)
				}
			}
		}
		p.finish(op, a)
		if op.Outcome == Unknown {
			client = p.rec.NewClient()
		}
	}
}

// memberClient adds the phase's nodes to its group and removes them (PUT and DELETE of
// …/groups/{group}/members/{node}) and reads the group's member list, which is a read of
// every (group, node) register at once: one operation per node, all with the list's call
// and return times.
func (p *phase) memberClient(ctx context.Context, replica int) {
	client := p.rec.NewClient()
	base := "/v1/orgs/" + p.nodesOrg + "/groups/" + p.group + "/members"
	key := func(node string) string { return p.nodesOrg + "/" + p.group + "/" + node }
	for ctx.Err() == nil {
		m := p.marker()
		if p.intn(100) < 35 {
			var reads []*Op
			for _, node := range p.nodes {
				reads = append(reads, p.rec.Begin(&Op{Client: client, Family: "member", Key: key(node), Kind: "get", Replica: replica, RequestID: "rb-" + m}))
			}
			a := p.do(ctx, replica, "GET", base+"?limit=100", "rb-"+m, nil, nil)
			var list struct {
				Items []struct {
					Node   string `json:"node"`
					Static bool   `json:"static"`
				} `json:"items"`
				Continue string `json:"continue"`
			}
			out, bad := Classify(a.status, a.body, a.err)
			if out == OK {
				if err := json.Unmarshal(a.body, &list); err != nil || list.Continue != "" {
					// Three nodes fit one page; anything else is an answer strata may not give.
					out, bad = Failed, fmt.Sprintf("member list of %d nodes unreadable or paged: %v %s", len(p.nodes), err, truncate(a.body, 300))
				}
			}
			if bad != "" {
				p.mu.Lock()
				p.statusBad = append(p.statusBad, Violation{Check: "status", Key: p.nodesOrg + "/" + p.group, Message: bad})
				p.mu.Unlock()
			}
			static := map[string]bool{}
			for _, it := range list.Items {
				static[it.Node] = it.Static
			}
			for i, op := range reads {
				op.Exists, op.Outcome, op.Status = static[p.nodes[i]], out, a.status
				p.rec.End(op)
			}
			if a.err != nil {
				time.Sleep(20 * time.Millisecond)
			}
			if reads[0].Outcome == Unknown {
				client = p.rec.NewClient()
			}
			continue
		}
		node := p.nodes[p.intn(len(p.nodes))]
		op := &Op{Client: client, Family: "member", Key: key(node), Replica: replica, RequestID: "rb-" + m}
		var a answer
		if p.intn(2) == 0 {
			op.Kind = "add"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "PUT", base+"/"+node, op.RequestID, nil, nil)
		} else {
			op.Kind = "remove"
			p.rec.Begin(op)
			a = p.do(ctx, replica, "DELETE", base+"/"+node, op.RequestID, nil, nil)
		}
		p.finish(op, a)
		if op.Outcome == Unknown {
			client = p.rec.NewClient()
		}
	}
}

// moverClient moves the mover nodes between the nodes' org and another one and relabels
// them (a merge PATCH of spec.org, the color label and the marker), so that the
// org-filtered node watch sees nodes move in (ADDED), out (DELETED), and change elsewhere
// (not sent). Its writes are checked through the watches and the statuses only (the nodes
// were created before the history began, so no register starts from them).
//
// One move in three is a bulk apply (POST /v1/nodes:apply) of every mover at once, a
// transaction of several changes, whose reported results CheckBulk holds to the log.
func (p *phase) moverClient(ctx context.Context, replica int) {
	for ctx.Err() == nil {
		if p.bulkApplies && p.intn(3) == 0 {
			p.bulkApply(ctx, replica)
			sleepCtx(ctx, time.Duration(20+p.intn(30))*time.Millisecond)
			continue
		}
		node := p.movers[p.intn(len(p.movers))]
		m := p.marker()
		org := []string{p.nodesOrg, p.awayOrg}[p.intn(2)]
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels":      map[string]any{colorLabel: []string{"red", "blue"}[p.intn(2)]},
			"annotations": map[string]any{markerAnnotation: m}}, "spec": map[string]any{"org": org}})
		a := p.do(ctx, replica, "PATCH", "/v1/nodes/"+node, "rb-"+m, body, map[string]string{"Content-Type": "application/merge-patch+json"})
		if _, bad := Classify(a.status, a.body, a.err); bad != "" || a.err == nil && a.status == 404 {
			if bad == "" {
				bad = "a PATCH of a node that exists answered 404"
			}
			p.mu.Lock()
			p.statusBad = append(p.statusBad, Violation{Check: "status", Key: "Node//" + node, Message: bad})
			p.mu.Unlock()
		}
		sleepCtx(ctx, time.Duration(20+p.intn(30))*time.Millisecond)
	}
}

// bulkApply applies every mover in one NDJSON request (one batch: one transaction), each
// line with its own marker, a random org and color, and records the result of each line.
func (p *phase) bulkApply(ctx context.Context, replica int) {
	ap := BulkApply{Replica: replica}
	var body bytes.Buffer
	for _, node := range p.movers {
		m := p.marker()
		line, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": node,
			"labels":      map[string]any{colorLabel: []string{"red", "blue"}[p.intn(2)]},
			"annotations": map[string]any{markerAnnotation: m}},
			"spec": map[string]any{"org": []string{p.nodesOrg, p.awayOrg}[p.intn(2)]}})
		body.Write(append(line, '\n'))
		ap.Lines = append(ap.Lines, BulkLine{Name: node, Marker: m})
	}
	ap.Call = p.rec.Now()
	a := p.do(ctx, replica, "POST", "/v1/nodes:apply", "rb-"+ap.Lines[0].Marker, body.Bytes(), map[string]string{"Content-Type": "application/x-ndjson"})
	ap.Return, ap.Status = p.rec.Now(), a.status
	if a.err != nil {
		ap.Err = a.err.Error()
	}
	if _, bad := Classify(a.status, a.body, a.err); bad != "" {
		p.mu.Lock()
		p.statusBad = append(p.statusBad, Violation{Check: "status", Key: "nodes:apply", Message: bad})
		p.mu.Unlock()
	}
	if a.status == 200 {
		sc := bufio.NewScanner(bytes.NewReader(a.body))
		for sc.Scan() {
			var r struct {
				Line    int             `json:"line"`
				Result  string          `json:"result"`
				Problem json.RawMessage `json:"problem"`
			}
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.Line < 1 || r.Line > len(ap.Lines) {
				continue // the summary, or a line cut short
			}
			ap.Lines[r.Line-1].Result, ap.Lines[r.Line-1].Problem = r.Result, r.Problem
		}
	}
	p.mu.Lock()
	p.bulk = append(p.bulk, ap)
	p.mu.Unlock()
}

func lockBody(id string) []byte {
	b, _ := json.Marshal(map[string]any{"ID": id, "Operation": "OperationTypeApply", "Who": "robustness@harness",
		"Version": "1.5.7", "Created": time.Now().UTC(), "Path": ""})
	return b
}

func stateBody(serial int64) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.5.7","serial":%d,"lineage":"robustness","outputs":{},"resources":[]}`, serial))
}

// lockClient is a Terraform run through the HTTP backend: LOCK, a state write fenced by the
// lock id (POST ?ID=), UNLOCK; after a refused LOCK it sometimes sends UNLOCK with its own id
// anyway (a confused client, which must get 423 while another holds the lock); after an
// unknown outcome it unlocks until it knows.
func (p *phase) lockClient(ctx context.Context, replica, ws int) {
	client := p.rec.NewClient()
	path := "/v1/state/" + p.project + "/" + p.workspaces[ws]
	key := p.project + "/" + p.workspaces[ws]
	call := func(kind, id string, serial int64) *Op {
		m := p.marker()
		op := &Op{Client: client, Family: "lock", Key: key, Kind: kind, Replica: replica, LockID: id, Serial: serial, RequestID: "rb-" + m}
		p.rec.Begin(op)
		var a answer
		switch kind {
		case "lock":
			a = p.do(ctx, replica, "LOCK", path, op.RequestID, lockBody(id), nil)
		case "unlock":
			a = p.do(context.WithoutCancel(ctx), replica, "UNLOCK", path, op.RequestID, []byte(`{"ID":"`+id+`"}`), nil)
		case "write":
			a = p.do(ctx, replica, "POST", path+"?ID="+url.QueryEscape(id), op.RequestID, stateBody(serial), nil)
		}
		if kind == "lock" && a.status == 423 {
			var holder struct{ ID string }
			if json.Unmarshal(a.body, &holder) == nil {
				op.Holder = holder.ID
			}
		}
		p.finish(op, a)
		if op.Outcome == Unknown {
			client = p.rec.NewClient()
		}
		return op
	}
	for ctx.Err() == nil {
		id := p.marker()
		l := call("lock", id, 0)
		switch {
		case l.Outcome == OK:
			time.Sleep(20 * time.Millisecond) // a run plans under its lock, then writes
			call("write", id, p.serial.Add(1))
		case l.Outcome == Failed && p.intn(2) == 0:
			call("unlock", id, 0)
			continue
		case l.Outcome == Failed:
			time.Sleep(5 * time.Millisecond)
			continue
		}
		// Unlock until the answer says the lock is gone (200) or was never this client's
		// (423), even after the phase ends: a lock left behind would refuse everyone.
		for i := 0; i < 100; i++ {
			if u := call("unlock", id, 0); u.Outcome == OK || u.Status == 423 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// pgClient is a Terraform run through the pg backend: pg_try_advisory_lock on the
// workspace's row id in a session of its own, a pause, pg_advisory_unlock. A session that
// fails ends (its key is released at a moment nobody sees: a pglost operation) and a new one
// is opened.
func (p *phase) pgClient(ctx context.Context, ws int) {
	client := p.rec.NewClient()
	key := p.project + "/" + p.workspaces[ws]
	var s *db.Session
	name := ""
	lost := func() {
		op := &Op{Client: p.rec.NewClient(), Family: "lock", Key: key, Kind: "pglost", Replica: -1, LockID: name, Outcome: Unknown}
		p.rec.Begin(op)
		p.rec.End(op)
		if s != nil {
			_ = s.Close(context.Background())
		}
		s = nil
		client = p.rec.NewClient()
	}
	defer func() {
		if s != nil {
			_ = s.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if s == nil {
			octx, cancel := context.WithTimeout(ctx, p.timeout)
			ns, err := db.OpenSession(octx, p.dbURL, "", "robustness-pg")
			cancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			s, name = ns, fmt.Sprintf("%s-s%d-%d", p.prefix, ws, p.marks.Add(1))
		}
		step := func(kind string) (*Op, bool) {
			op := &Op{Client: client, Family: "lock", Key: key, Kind: kind, Replica: -1, LockID: name}
			p.rec.Begin(op)
			octx, cancel := context.WithTimeout(ctx, p.timeout)
			var err error
			if kind == "pglock" {
				op.Granted, err = s.TryAdvisoryLock(octx, p.stateIDs[ws])
			} else {
				op.Granted, err = s.AdvisoryUnlock(octx, p.stateIDs[ws])
			}
			cancel()
			if err != nil {
				op.Outcome, op.Err = Unknown, err.Error()
			}
			p.rec.End(op)
			return op, err == nil
		}
		op, ok := step("pglock")
		if !ok {
			lost()
			continue
		}
		if !op.Granted {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		time.Sleep(20 * time.Millisecond)
		if _, ok := step("pgunlock"); !ok {
			lost()
		}
		time.Sleep(time.Duration(20+p.intn(40)) * time.Millisecond) // leave the HTTP clients a turn
	}
}

// lister pages through the org list, with and without a label selector, three at a time;
// every page is recorded as a read of each object it covers.
func (p *phase) lister(ctx context.Context, replica int) {
	for ctx.Err() == nil {
		var sel map[string]string
		q := url.Values{"limit": {"3"}}
		if p.intn(2) == 0 {
			sel = map[string]string{colorLabel: "red"}
			q.Set("labelSelector", colorLabel+"=red")
		}
		after := ""
		for ctx.Err() == nil {
			page := ListPage{Kind: "Org", Replica: replica, Selector: sel, After: after, Call: p.rec.Now()}
			a := p.do(ctx, replica, "GET", "/v1/orgs?"+q.Encode(), "", nil, nil)
			page.Return = p.rec.Now()
			if a.err != nil || a.status != 200 {
				if a.err == nil {
					if _, bad := Classify(a.status, a.body, nil); bad != "" {
						p.mu.Lock()
						p.statusBad = append(p.statusBad, Violation{Check: "status", Key: "list", Message: bad})
						p.mu.Unlock()
					}
				}
				time.Sleep(50 * time.Millisecond)
				break
			}
			var l struct {
				Items           []objectJSON `json:"items"`
				ResourceVersion string       `json:"resourceVersion"`
				Continue        string       `json:"continue"`
			}
			if err := json.Unmarshal(a.body, &l); err != nil {
				break
			}
			page.RV = parseRV(l.ResourceVersion)
			page.Last = l.Continue == ""
			for _, it := range l.Items {
				page.Items = append(page.Items, ListItem{Name: it.Metadata.Name, RV: parseRV(it.Metadata.ResourceVersion), Marker: it.Metadata.Annotations[markerAnnotation]})
			}
			p.mu.Lock()
			p.pages = append(p.pages, page)
			p.mu.Unlock()
			if page.Last || len(page.Items) == 0 {
				break
			}
			after = page.Items[len(page.Items)-1].Name
			q.Set("continue", l.Continue)
		}
		q.Del("continue")
	}
}

// watchSpec is what a watcher follows: the plain org watch, the org watch with a label
// selector, or the node watch of one org.
type watchSpec struct {
	name     string // appended to the stream's name
	kind     string // Org, Node
	path     string // the collection: /v1/orgs, /v1/nodes
	selector map[string]string
	org      string
}

func (w watchSpec) query(from int64) string {
	q := url.Values{"watch": {"true"}, "resourceVersion": {strconv.FormatInt(from, 10)}}
	if len(w.selector) > 0 {
		var parts []string
		for k, v := range w.selector {
			parts = append(parts, k+"="+v)
		}
		q.Set("labelSelector", strings.Join(parts, ","))
	}
	if w.org != "" {
		q.Set("org", w.org)
	}
	return w.path + "?" + q.Encode()
}

// watcher follows a watch on one replica from version from, resuming after every
// disconnect from the last version delivered; a 410 ends the stream (the next starts from a
// new list). progress is updated with the last version confirmed.
func (p *phase) watcher(ctx context.Context, replica int, from int64, progress *atomic.Int64, w watchSpec) {
	newStream := func(suffix string) WatchStream {
		return WatchStream{Name: fmt.Sprintf("%s/watch%s-replica-%d%s", p.name, w.name, replica, suffix), Replica: replica,
			Kind: w.kind, Selector: w.selector, Org: w.org}
	}
	st := newStream("")
	defer func() {
		p.mu.Lock()
		p.streams = append(p.streams, st)
		p.mu.Unlock()
	}()
	stream := &http.Client{Transport: p.http.Transport} // no overall timeout: a stream lasts
	for ctx.Err() == nil {
		seg := WatchSegment{From: from}
		req, _ := http.NewRequestWithContext(ctx, "GET", p.replicas[replica]+w.query(from), nil)
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := stream.Do(req)
		if err != nil {
			seg.End = "transport: " + err.Error()
			st.Segments = append(st.Segments, seg)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		if resp.StatusCode != 200 {
			seg.Status = resp.StatusCode
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seg.End = truncate(b, 200)
		} else {
			p.readStream(resp, &seg, &from, progress)
		}
		st.Segments = append(st.Segments, seg)
		n := len(seg.Events)
		if seg.Status == 410 || n > 0 && seg.Events[n-1].Type == "ERROR" && seg.Events[n-1].Status == 410 {
			// The history this stream followed is gone (pruned, or a new epoch after a
			// promotion): list again and follow a new stream from the list's version.
			p.mu.Lock()
			p.streams = append(p.streams, st)
			n := len(p.streams) // read under the lock: every watcher appends
			p.mu.Unlock()
			st = newStream(fmt.Sprintf("/relist-%d", n))
			for ctx.Err() == nil {
				rv, err := p.listRV(ctx, replica)
				if err == nil {
					from = rv
					progress.Store(from)
					break
				}
				sleepCtx(ctx, 100*time.Millisecond)
			}
		} else if seg.Status != 0 {
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
}

// readStream reads one watch response into seg, advancing from and progress with every
// version delivered (an event's or a bookmark's).
func (p *phase) readStream(resp *http.Response, seg *WatchSegment, from *int64, progress *atomic.Int64) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		var line struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			seg.End = "bad line: " + truncate(sc.Bytes(), 200)
			break
		}
		ev := WatchEvent{Type: line.Type, At: p.rec.Now()}
		if line.Type == "ERROR" {
			var pr struct {
				Status int    `json:"status"`
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(line.Object, &pr)
			ev.Status, ev.Reason = pr.Status, pr.Reason
		} else {
			var o objectJSON
			_ = json.Unmarshal(line.Object, &o)
			ev.Name, ev.RV, ev.Marker = o.Metadata.Name, parseRV(o.Metadata.ResourceVersion), o.Metadata.Annotations[markerAnnotation]
			if ev.RV > *from {
				*from = ev.RV
				progress.Store(*from)
			}
		}
		seg.Events = append(seg.Events, ev)
	}
	resp.Body.Close()
	if seg.End == "" {
		seg.End = "eof"
		if err := sc.Err(); err != nil {
			seg.End = "transport: " + err.Error()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// listRV is the resourceVersion of a one-item list on replica r: a version every earlier
// write is at or below, to start watchers from.
func (p *phase) listRV(ctx context.Context, r int) (int64, error) {
	a := p.do(ctx, r, "GET", "/v1/orgs?limit=1", "", nil, nil)
	if a.err != nil {
		return 0, a.err
	}
	if a.status != 200 {
		return 0, fmt.Errorf("list: %d %s", a.status, a.body)
	}
	var l struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil {
		return 0, err
	}
	return parseRV(l.ResourceVersion), nil
}

// mustDo is a setup request that must succeed (retried while the cluster settles).
func (p *phase) mustDo(ctx context.Context, method, path string, body []byte) error {
	var last answer
	for i := 0; i < 50; i++ {
		last = p.do(ctx, i%len(p.replicas), method, path, "", body, nil)
		if last.err == nil && last.status/100 == 2 {
			return nil
		}
		if last.err == nil && last.status == 409 && method == "POST" {
			return nil
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return fmt.Errorf("%s %s: %d %s %v", method, path, last.status, last.body, last.err)
}

var errSetup = errors.New("setup")

// setup creates what the phase's clients work on that is not itself under test: an org and
// nodes for the pillar rows, the Terraform project and its workspaces' first states.
func (p *phase) setup(ctx context.Context, objects, nodes, workspaces int) error {
	for i := range objects {
		p.objects = append(p.objects, fmt.Sprintf("%s-o%d", p.prefix, i))
	}
	org := p.prefix + "-nodes"
	if err := p.mustDo(ctx, "POST", "/v1/orgs", []byte(`{"metadata":{"name":"`+org+`"},"spec":{}}`)); err != nil {
		return err
	}
	p.nodesOrg, p.group = org, p.prefix+"-g"
	if err := p.mustDo(ctx, "POST", "/v1/orgs/"+org+"/groups", []byte(`{"metadata":{"name":"`+p.group+`"},"spec":{}}`)); err != nil {
		return err
	}
	for i := range nodes {
		n := fmt.Sprintf("%s-n%d", p.prefix, i)
		p.nodes = append(p.nodes, n)
		if err := p.mustDo(ctx, "POST", "/v1/nodes", []byte(`{"metadata":{"name":"`+n+`"},"spec":{"org":"`+org+`"}}`)); err != nil {
			return err
		}
	}
	// Movers: nodes that move between the nodes' org and another one, for the org-filtered
	// node watch; they carry no memberships and no pillar rows under test.
	p.awayOrg = p.prefix + "-away"
	if err := p.mustDo(ctx, "POST", "/v1/orgs", []byte(`{"metadata":{"name":"`+p.awayOrg+`"},"spec":{}}`)); err != nil {
		return err
	}
	for i := range 2 {
		n := fmt.Sprintf("%s-m%d", p.prefix, i)
		p.movers = append(p.movers, n)
		if err := p.mustDo(ctx, "POST", "/v1/nodes", []byte(`{"metadata":{"name":"`+n+`"},"spec":{"org":"`+org+`"}}`)); err != nil {
			return err
		}
	}
	if err := p.mustDo(ctx, "PUT", "/v1/projects/"+p.project, nil); err != nil {
		return err
	}
	for i := range workspaces {
		ws := fmt.Sprintf("w%d", i)
		if err := p.mustDo(ctx, "POST", "/v1/state/"+p.project+"/"+ws, stateBody(0)); err != nil {
			return err
		}
		id, err := StateID(ctx, p.db, p.project, ws)
		if err != nil {
			return fmt.Errorf("%w: state id: %v", errSetup, err)
		}
		p.workspaces, p.stateIDs = append(p.workspaces, ws), append(p.stateIDs, id)
	}
	return nil
}

// finalWrite is the write every phase ends with: it must succeed (on any replica), and the
// watchers must all confirm it before they stop, so their streams cover the whole phase.
// The org it creates is labelled so that the selector watch covers it too; a node created
// in the nodes' org right after it is the node watch's final write (finalNode).
func (p *phase) finalWrite(ctx context.Context) (int64, error) {
	return p.create(ctx, "/v1/orgs", p.prefix+"-final",
		[]byte(`{"metadata":{"name":"`+p.prefix+`-final","labels":{"`+colorLabel+`":"red"}},"spec":{}}`))
}

// finalNode is the node watch's final write: a node created in the nodes' org.
func (p *phase) finalNode(ctx context.Context) (int64, error) {
	return p.create(ctx, "/v1/nodes", p.prefix+"-final",
		[]byte(`{"metadata":{"name":"`+p.prefix+`-final"},"spec":{"org":"`+p.nodesOrg+`"}}`))
}

// create creates an object that must be created, retrying on any replica, and returns its
// version (a 409 after a try whose answer was lost: the version it has).
func (p *phase) create(ctx context.Context, collection, name string, body []byte) (int64, error) {
	var last answer
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		last = p.do(ctx, i%len(p.replicas), "POST", collection, "", body, nil)
		if last.err == nil && last.status == 201 {
			var o objectJSON
			if err := json.Unmarshal(last.body, &o); err != nil {
				return 0, err
			}
			return parseRV(o.Metadata.ResourceVersion), nil
		}
		if last.err == nil && last.status == 409 {
			a := p.do(ctx, 0, "GET", collection+"/"+name, "", nil, nil)
			var o objectJSON
			if a.err == nil && a.status == 200 && json.Unmarshal(a.body, &o) == nil {
				return parseRV(o.Metadata.ResourceVersion), nil
			}
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return 0, fmt.Errorf("the final write to %s never succeeded: %d %s %v", collection, last.status, strings.TrimSpace(string(last.body)), last.err)
}
