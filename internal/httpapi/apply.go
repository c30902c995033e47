package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/resource"
)

// analyzeAfter is how many created nodes make a bulk apply refresh the planner's statistics.
const analyzeAfter = 1000

// applyWorkers is how many batches of one bulk apply run at once.
const applyWorkers = 3

// applyBatch is how many lines of a bulk apply share one transaction.
const applyBatch = 500

// DefaultBulkBufferBytes is the default budget of input one bulk apply may hold.
const DefaultBulkBufferBytes = 32 << 20

// lineCost is what a line read and parsed but not yet applied counts against the bulk
// budget: three times its length — its parsed form (the spec is copied), and the copies its
// validation makes while its batch is applied (the spec decoded and re-encoded in canonical
// form) — plus a fixed part for the item itself, so the budget bounds the memory the lines
// cost rather than only their bytes. Measured (docs/benchmarks.md), the server's peak memory
// then grows by about twice the budget, the garbage collector's headroom.
func lineCost(raw []byte) int64 { return 3*int64(len(raw)) + 1024 }

// bulkBudget bounds the input one bulk apply holds: lines read and parsed whose batch has
// not been applied yet. The reader takes a line's cost before queueing it and the worker
// gives it back after the batch commits; when the budget is spent the reader stops reading,
// so TCP carries the back-pressure to the client whatever the body's size. Each request has
// its own budget: memory is bounded per request, and the number of requests by the server's
// connection limits.
type bulkBudget struct {
	mu   sync.Mutex
	cond sync.Cond
	max  int64
	used int64
	peak *atomic.Int64 // the largest use seen, for tests and metrics
	// input is the bytes of the lines held (their raw length, whatever lineCost charges),
	// inputPeak the most seen: counted apart from used, it shows what the budget really
	// holds back, so a line charged less than lineCost says shows as more input held.
	input     int64
	inputPeak *atomic.Int64
}

func newBulkBudget(max int64, peak, inputPeak *atomic.Int64) *bulkBudget {
	b := &bulkBudget{max: max, peak: peak, inputPeak: inputPeak}
	b.cond.L = &b.mu
	return b
}

// clamp makes a cost the budget can ever grant: a single line larger than the whole budget
// (possible when --bulk-buffer-bytes is below --max-body-bytes) waits until nothing else is
// held, then goes through alone.
func (b *bulkBudget) clamp(n int64) int64 { return min(n, b.max) }

// tryTake takes n for a line of input bytes when it is free now.
func (b *bulkBudget) tryTake(n, input int64) bool {
	n = b.clamp(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.take(n, input)
	return true
}

// wait takes n for a line of input bytes, blocking until it is free.
func (b *bulkBudget) wait(n, input int64) {
	n = b.clamp(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used+n > b.max {
		b.cond.Wait()
	}
	b.take(n, input)
}

func (b *bulkBudget) take(n, input int64) {
	b.used += n
	b.input += input
	raise(b.peak, b.used)
	raise(b.inputPeak, b.input)
}

// raise makes peak at least v.
func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// give gives back n taken for lines of input bytes.
func (b *bulkBudget) give(n, input int64) {
	b.mu.Lock()
	b.used -= n
	b.input -= input
	b.mu.Unlock()
	b.cond.Broadcast()
}

// applyBatchOf is a batch of lines on its way to a worker, with the budget it holds.
type applyBatchOf struct {
	items []resource.ApplyItem
	cost  int64
	input int64 // the bytes of its lines
}

// applyLine is one line of POST /v1/nodes:apply: a node, plus optionally the complete list
// of its static group memberships (groups of its org).
type applyLine struct {
	Kind     string          `json:"kind"`
	Metadata api.ObjectMeta  `json:"metadata"`
	Spec     json.RawMessage `json:"spec"`
	Groups   *[]string       `json:"groups"`
}

// nodeApply streams an NDJSON inventory of nodes in and the per-line results out. The body is
// not bound by --max-body-bytes (an inventory of 10k minions is megabytes), but each line is.
// Lines are applied in batches of applyBatch in one transaction each (resource.ApplyNodes),
// applyWorkers batches at a time;
// a bad line is reported and the good lines around it are applied. Each line is authorized on
// its own: nodes:write:<name>, and groups:write:<org> when it sets memberships. The answer is
// NDJSON: one api.ApplyResult per line as its batch commits, then {"summary": …}.
func (a *API) nodeApply(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isNDJSON(ct) {
		return fault.Invalid("", "Content-Type must be application/x-ndjson (one JSON node per line), not %q", ct)
	}
	if p.ListFilter("nodes", "write").Empty() {
		// No line could pass: refuse the request as a whole.
		return p.Check("nodes", "write", "*")
	}
	// Results go out while the body is still coming in. Without full duplex, net/http ends an
	// HTTP/1.x request body once the answer's headers are sent: it discards up to 256 KiB of
	// the unread body and closes it beyond that, so every line after the first flushes was lost.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		return fmt.Errorf("bulk apply needs a full-duplex connection: %w", err)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	// One writer goroutine owns the answer; workers apply batches on connections of their
	// own. A node's lines always go to the same worker (by a hash of its name), so two lines
	// for one node apply in file order; different nodes apply in parallel, which roughly
	// halves an import's time because one batch alone is a ping-pong of round trips.
	var sum api.ApplySummary
	results := make(chan []api.ApplyResult, 2*applyWorkers)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for rs := range results {
			for _, res := range rs {
				sum.Lines++
				switch res.Result {
				case "created":
					sum.Created++
				case "updated":
					sum.Updated++
				case "unchanged":
					sum.Unchanged++
				default:
					sum.Errors++
				}
				_ = enc.Encode(res)
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}()
	lineError := func(line int, name string, err error) {
		results <- []api.ApplyResult{{Line: line, Name: resultName(name), Result: "error", Problem: a.problemOf(r, err)}}
	}
	budget := newBulkBudget(a.bulkBuffer, &a.bulkPeak, &a.bulkInputPeak)
	var workers sync.WaitGroup
	queues := make([]chan applyBatchOf, applyWorkers)
	for i := range queues {
		queues[i] = make(chan applyBatchOf, 1)
		workers.Add(1)
		go func(queue chan applyBatchOf) {
			defer workers.Done()
			for batch := range queue {
				outs := a.resources.ApplyNodes(r.Context(), batch.items)
				budget.give(batch.cost, batch.input)
				rs := make([]api.ApplyResult, 0, len(outs))
				for _, o := range outs {
					res := api.ApplyResult{Line: o.Line, Name: resultName(o.Name), Result: o.Result}
					if o.Err != nil {
						res.Result, res.Problem = "error", a.problemOf(r, o.Err)
					}
					rs = append(rs, res)
				}
				results <- rs
			}
		}(queues[i])
	}
	batches := make([]applyBatchOf, applyWorkers)
	send := func(w int) {
		queues[w] <- batches[w]
		batches[w] = applyBatchOf{}
	}
	add := func(it resource.ApplyItem, cost, input int64) {
		if !budget.tryTake(cost, input) {
			// The budget is spent: hand every partial batch to its worker (they hold budget
			// that only their application gives back), then wait; the body is not read
			// meanwhile.
			for w := range batches {
				if len(batches[w].items) > 0 {
					send(w)
				}
			}
			budget.wait(cost, input)
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(it.Obj.Metadata.Name))
		w := int(h.Sum32() % applyWorkers)
		batches[w].items = append(batches[w].items, it)
		batches[w].cost += budget.clamp(cost)
		batches[w].input += input
		if len(batches[w].items) >= applyBatch {
			send(w)
		}
	}

	br := bufio.NewReaderSize(r.Body, 64<<10)
	var buf []byte // reused for every line: what a parsed line keeps, it copies
	for line := 1; ; line++ {
		raw, err := readLine(br, a.maxBody, buf[:0])
		buf = raw
		if errors.Is(err, errLineTooLong) {
			lineError(line, "", fault.New(fault.KindTooLarge, "line %d is longer than the limit of %d bytes", line, a.maxBody))
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			lineError(line, "", fault.Invalid("", "reading the body: %v", err))
			break
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			if it, name, lerr := a.parseApplyLine(p, line, raw); lerr != nil {
				lineError(line, name, lerr)
			} else {
				add(it, lineCost(raw), int64(len(raw)))
			}
		}
		if errors.Is(err, io.EOF) || r.Context().Err() != nil {
			break
		}
	}
	for w := range batches {
		if len(batches[w].items) > 0 {
			send(w)
		}
		close(queues[w])
	}
	workers.Wait()
	close(results)
	<-written
	_ = enc.Encode(struct {
		Summary api.ApplySummary `json:"summary"`
	}{sum})
	if sum.Created >= analyzeAfter {
		// A large import can change the tables' size by orders of magnitude before
		// autovacuum notices; until statistics catch up the planner may plan selector
		// lists for the old, small tables (seen: 10 s instead of 0.2 s for one list).
		if err := a.resources.Analyze(r.Context()); err != nil {
			a.logger.WarnContext(r.Context(), "analyze after bulk apply", "err", err)
		}
	}
	return nil
}

func (a *API) parseApplyLine(p *auth.Principal, line int, raw []byte) (resource.ApplyItem, string, error) {
	var l applyLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		return resource.ApplyItem{}, "", jsonError(err)
	}
	if dec.More() {
		return resource.ApplyItem{}, "", fault.Invalid("", "line %d holds more than one JSON value", line)
	}
	name := l.Metadata.Name
	if name == "" {
		return resource.ApplyItem{}, "", fault.Invalid("/metadata/name", "metadata.name is required")
	}
	if err := p.Check("nodes", "write", name); err != nil {
		return resource.ApplyItem{}, name, err
	}
	it := resource.ApplyItem{Line: line, Obj: api.Object{Kind: l.Kind, Metadata: l.Metadata, Spec: l.Spec}}
	if l.Groups != nil {
		it.HasGroups, it.Groups = true, *l.Groups
		org := resource.NodeOrg(it.Obj)
		if err := p.Check("groups", "write", org); err != nil {
			return resource.ApplyItem{}, name, err
		}
	}
	return it, name, nil
}

// resultName is a line's node name as its result carries it: a name is at most 253
// characters when valid, and an invalid one is not echoed whole (a line may be megabytes).
func resultName(name string) string { return fault.Truncate(name, 260) }

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline, appended to buf; a line longer than
// max is consumed to its end and reported as errLineTooLong.
func readLine(br *bufio.Reader, max int64, buf []byte) ([]byte, error) {
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if int64(len(buf)+len(chunk)) > max+1 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			// A too-long last line without a newline is reported too (the next read
			// returns io.EOF), not dropped.
			return nil, errLineTooLong
		}
		return bytes.TrimRight(buf, "\r\n"), err
	}
}

func isNDJSON(ct string) bool {
	switch mediaType(ct) {
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/json":
		return true
	}
	return false
}

// problemOf renders err as the problem document writeError would send for one line of a
// bulk apply, and logs it when it is the server's fault, as writeError does.
func (a *API) problemOf(r *http.Request, err error) *api.Problem {
	fe := classify(err)
	if fe.Kind == fault.KindInternal || fe.Kind == fault.KindUnavailable {
		a.logger.ErrorContext(r.Context(), "bulk apply line failed", "path", r.URL.Path, "err", err)
	}
	return lineProblem(r, fe)
}

// lineProblem is the problem document of fe inside a stream or a per-line result: the one
// writeError would send (an internal error's detail replaced by a pointer to the log), with
// the 503 reason and outcome, minus the other extensions a typed api.Problem cannot carry.
// The outcome matters most here: a line whose write may have committed must say so, or a
// client reads its 503 as "not written" (found by the robustness harness's bulk check).
func lineProblem(r *http.Request, fe *fault.Error) *api.Problem {
	info, ok := kinds[fe.Kind]
	if !ok || fe.Kind == fault.KindInternal {
		info = kinds[fault.KindInternal]
		fe = &fault.Error{Kind: fault.KindInternal, Detail: fmt.Sprintf("internal error; the server log has the details (request path %s)", r.URL.Path)}
	}
	p := &api.Problem{Type: ProblemTypeBase + info.slug, Title: info.title, Status: info.status, Detail: fe.Detail, Reason: fault.ReasonOf(fe)}
	if o, ok := fe.Extensions["outcome"].(string); ok {
		p.Outcome = o
	}
	for _, f := range fe.Fields {
		p.Errors = append(p.Errors, api.FieldError{Field: f.Field, Message: f.Message})
	}
	return p
}

// streamProblem renders the error that ends a stream (a watch, an audit follow) as the
// object of its ERROR event, with the request path as instance, and logs it by what it
// means: a replica shutting down ends its streams as planned (info), anything else that is
// the server's fault is an error. what names the stream in the log ("watch").
func (a *API) streamProblem(r *http.Request, what string, err error) *api.Problem {
	fe := classify(err)
	switch {
	case fault.ReasonOf(fe) == fault.ReasonShuttingDown:
		a.logger.InfoContext(r.Context(), what+" ended: the server is shutting down", "path", r.URL.Path)
	case fe.Kind == fault.KindInternal || fe.Kind == fault.KindUnavailable:
		a.logger.ErrorContext(r.Context(), what+" failed", "path", r.URL.Path, "reason", fault.ReasonOf(fe), "err", err)
	}
	p := lineProblem(r, fe)
	p.Instance = r.URL.Path
	return p
}

func mediaType(ct string) string {
	return strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
}
