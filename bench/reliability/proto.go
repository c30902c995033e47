package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/client"
)

// This file speaks Terraform's http backend protocol with plain net/http, as Terraform does
// (Basic auth with the token as password, LOCK/UNLOCK methods, POST ?ID=<lock id> with
// Content-MD5), and counts every answer.

// replica is one strata replica under test.
type replica struct {
	name string // "A" or "B"
	base string // http://127.0.0.1:port
}

// reply is one request's outcome: a status and body, or a transport error.
type reply struct {
	status     int
	body       []byte
	header     http.Header
	err        error
	start, end time.Time
}

// unavailable reports an answer Terraform would see as the service being away: a 503 or a
// transport error (refused, reset, timed out).
func (r reply) unavailable() bool { return r.err != nil || r.status == http.StatusServiceUnavailable }

// odd is a 5xx answer other than 503: never acceptable, not even during a restart.
type odd struct {
	at      time.Time
	replica string
	op      string
	status  int
	body    string
}

// recorder counts answers by operation and status, and keeps the times of unavailability
// and every 5xx other than 503.
type recorder struct {
	mu      sync.Mutex
	codes   map[string]int // "LOCK 200", "POST error"
	unavail []time.Time    // completion times of 503s and transport errors
	odds    []odd
}

func newRecorder() *recorder { return &recorder{codes: map[string]int{}} }

func (rec *recorder) add(rep *replica, op string, r reply) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if r.err != nil {
		rec.codes[op+" error"]++
	} else {
		rec.codes[fmt.Sprintf("%s %d", op, r.status)]++
	}
	if r.unavailable() {
		rec.unavail = append(rec.unavail, r.end)
	}
	if r.err == nil && r.status >= 500 && r.status != http.StatusServiceUnavailable {
		rec.odds = append(rec.odds, odd{at: r.end, replica: rep.name, op: op, status: r.status, body: snippet(r.body)})
	}
}

// summary prints the counts as "LOCK 200=123 LOCK 423=4 …", sorted.
func (rec *recorder) summary() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	keys := make([]string, 0, len(rec.codes))
	for k := range rec.codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, rec.codes[k])
	}
	return strings.Join(parts, " ")
}

func (rec *recorder) count(suffix string) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for k, v := range rec.codes {
		if strings.HasSuffix(k, " "+suffix) {
			n += v
		}
	}
	return n
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// proto sends the backend protocol's requests to a replica.
type proto struct {
	http    *http.Client
	token   string
	project string
	rec     *recorder
}

func newProto(token, project string, timeout time.Duration, rec *recorder) *proto {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 128
	return &proto{http: &http.Client{Transport: tr, Timeout: timeout}, token: token, project: project, rec: rec}
}

// call sends one request and records its answer under op.
func (p *proto) call(ctx context.Context, rep *replica, op, method, path string, body []byte, header map[string]string) reply {
	r := reply{start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, method, rep.base+path, bytes.NewReader(body))
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	req.SetBasicAuth("strata", p.token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := p.http.Do(req)
	if err == nil {
		r.status, r.header = resp.StatusCode, resp.Header
		r.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	r.err, r.end = err, time.Now()
	if ctx.Err() == nil || r.err == nil {
		p.rec.add(rep, op, r)
	}
	return r
}

// retry repeats call while the answer is a 503 or a transport error, with a short growing
// backoff (50 ms doubling to 500 ms, jittered), until deadline. It returns the last answer.
func (p *proto) retry(ctx context.Context, rep *replica, op, method, path string, body []byte, header map[string]string, deadline time.Time) reply {
	wait := 50 * time.Millisecond
	for {
		r := p.call(ctx, rep, op, method, path, body, header)
		if !r.unavailable() || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return r
		}
		sleep(ctx, jitter(wait))
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (p *proto) statePath(workspace string) string {
	return "/v1/state/" + p.project + "/" + workspace
}

func (p *proto) lock(ctx context.Context, rep *replica, workspace string, info client.LockInfo, deadline time.Time) reply {
	b, _ := json.Marshal(info)
	return p.retry(ctx, rep, "LOCK", "LOCK", p.statePath(workspace), b, nil, deadline)
}

func (p *proto) unlock(ctx context.Context, rep *replica, workspace string, info client.LockInfo, deadline time.Time) reply {
	b, _ := json.Marshal(info)
	return p.retry(ctx, rep, "UNLOCK", "UNLOCK", p.statePath(workspace), b, nil, deadline)
}

func (p *proto) get(ctx context.Context, rep *replica, workspace string, deadline time.Time) reply {
	return p.retry(ctx, rep, "GET", http.MethodGet, p.statePath(workspace), nil, nil, deadline)
}

// post writes a state under lock id, with Content-MD5 as Terraform sends it.
func (p *proto) post(ctx context.Context, rep *replica, workspace, id string, data []byte, deadline time.Time) reply {
	sum := md5.Sum(data)
	h := map[string]string{"Content-Type": "application/json", "Content-MD5": base64.StdEncoding.EncodeToString(sum[:])}
	return p.retry(ctx, rep, "POST", http.MethodPost, p.statePath(workspace)+"?ID="+id, data, h, deadline)
}

// lockInfo is what Terraform sends with LOCK and UNLOCK.
func lockInfo(id, who string) client.LockInfo {
	return client.LockInfo{ID: id, Operation: "OperationTypeApply", Who: who, Version: "1.11.4", Created: time.Now().UTC()}
}

// stateDoc is a Terraform state with one terraform_data resource and one output, both
// carrying marker, so every write is unique and recognisable in the versions.
func stateDoc(serial int64, lineage, marker string) []byte {
	doc := map[string]any{
		"version":           4,
		"terraform_version": "1.11.4",
		"serial":            serial,
		"lineage":           lineage,
		"outputs":           map[string]any{"marker": map[string]any{"value": marker, "type": "string"}},
		"resources": []any{map[string]any{
			"mode": "managed", "type": "terraform_data", "name": "m",
			"provider": `provider["terraform.io/builtin/terraform"]`,
			"instances": []any{map[string]any{
				"schema_version": 0,
				"attributes": map[string]any{
					"id": marker, "input": map[string]any{"value": marker, "type": "string"},
					"output": map[string]any{"value": marker, "type": "string"}, "triggers_replace": nil,
				},
				"sensitive_attributes": []any{},
			}},
		}},
		"check_results": nil,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// stateMeta reads serial and lineage from a state document.
func stateMeta(b []byte) (serial int64, lineage string, err error) {
	var s struct {
		Serial  int64  `json:"serial"`
		Lineage string `json:"lineage"`
	}
	err = json.Unmarshal(b, &s)
	return s.Serial, s.Lineage, err
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// jitter returns a duration between d/2 and d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d/2)))
	if err != nil {
		return d
	}
	return d/2 + time.Duration(n.Int64())
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
