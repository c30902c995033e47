package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultServer is where the CLI looks for strata when neither --server nor STRATA_SERVER
// is given.
const DefaultServer = "http://127.0.0.1:7400"

// Client talks to one strata server with one token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	// UserAgent is sent with every request.
	UserAgent string
	// Retries is how many times a request answered 503 (Service Unavailable) with a
	// Retry-After header is sent again, after the wait the server asks for: a replica that is
	// shutting down or out of database connections says so, and the next attempt usually
	// lands. Only requests that cannot have been half done are retried — GET, HEAD, PUT and
	// DELETE, and any request the server refused before doing anything (reason read-only,
	// disk-full or connections) — and only with a body that can be sent again; never a write
	// whose outcome the server says is unknown (Problem.Outcome). 0 never
	// retries; New sets DefaultRetries.
	Retries int
	// MaxRetryWait is the longest Retry-After waited for: a server that asks for longer (a
	// database refusing writes asks for 10 s) is not waited for, its 503 is returned at once.
	// New sets DefaultMaxRetryWait.
	MaxRetryWait time.Duration
}

// DefaultRetries and DefaultMaxRetryWait are New's retry settings.
const (
	DefaultRetries      = 3
	DefaultMaxRetryWait = 5 * time.Second
)

// New returns a client for server (e.g. http://127.0.0.1:7400) authenticating with token.
// httpClient may be nil.
func New(server, token string, httpClient *http.Client) (*Client, error) {
	if server == "" {
		server = DefaultServer
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: scheme must be http or https", server)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 5 * time.Minute}
	}
	return &Client{base: u, token: token, http: httpClient, UserAgent: "strata-client",
		Retries: DefaultRetries, MaxRetryWait: DefaultMaxRetryWait}, nil
}

// Error is a non-2xx answer from the server.
type Error struct {
	Status  int
	Problem Problem
	// Body is the raw body when it was not a problem document (e.g. a 423 LockInfo).
	Body []byte
	// Lock is the workspace and holder of a 423 (Locked) answer about a Terraform lock.
	Lock *Lock
}

func (e *Error) Error() string {
	if e.Problem.Detail != "" {
		field, headline, rest := e.Problem.Lines()
		if field != "" {
			headline = field + ": " + headline
		}
		msg := fmt.Sprintf("%s (HTTP %d)", headline, e.Status)
		for _, f := range rest {
			if f.Field == "" {
				msg += "\n  " + f.Message
				continue
			}
			msg += fmt.Sprintf("\n  %s: %s", f.Field, f.Message)
		}
		return msg
	}
	if e.Lock != nil {
		return e.Lock.String()
	}
	if len(e.Body) > 0 {
		return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

func statusIs(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return statusIs(err, http.StatusNotFound) }

// IsConflict reports a 409.
func IsConflict(err error) bool { return statusIs(err, http.StatusConflict) }

// IsUnauthorized reports a 401.
func IsUnauthorized(err error) bool { return statusIs(err, http.StatusUnauthorized) }

// IsForbidden reports a 403.
func IsForbidden(err error) bool { return statusIs(err, http.StatusForbidden) }

// IsLocked reports a 423.
func IsLocked(err error) bool { return statusIs(err, http.StatusLocked) }

// Request is one API call, for the methods this package does not wrap yet.
type Request struct {
	Method      string
	Path        string // e.g. /v1/orgs/acme
	Query       url.Values
	Body        any    // marshalled as JSON unless RawBody is set
	RawBody     []byte // sent verbatim
	ContentType string
	Header      http.Header
}

// Do sends req and decodes a JSON answer into out (which may be nil). It returns the
// response headers.
func (c *Client) Do(ctx context.Context, req Request, out any) (http.Header, error) {
	resp, body, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	if out != nil && len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return resp.Header, fmt.Errorf("decode %s %s response: %w", req.Method, req.Path, err)
		}
	}
	return resp.Header, nil
}

// DoRaw sends req and returns the raw answer body.
func (c *Client) DoRaw(ctx context.Context, req Request) ([]byte, http.Header, error) {
	resp, body, err := c.send(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return body, resp.Header, nil
}

func (c *Client) send(ctx context.Context, req Request) (*http.Response, []byte, error) {
	var body io.Reader
	switch {
	case req.RawBody != nil:
		body = bytes.NewReader(req.RawBody)
	case req.Body != nil:
		b, err := json.Marshal(req.Body)
		if err != nil {
			return nil, nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
		if req.ContentType == "" {
			req.ContentType = "application/json"
		}
	}
	resp, err := c.stream(ctx, req, body)
	if err != nil {
		return resp, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s %s response: %w", req.Method, req.Path, err)
	}
	return resp, b, nil
}

// stream sends req with body and returns the response with its body unread; a non-2xx answer
// is read and returned as *Error. A 503 with a Retry-After is sent again as Retries says.
func (c *Client) stream(ctx context.Context, req Request, body io.Reader) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, req, body)
		wait, retry := c.retryAfter(req, body, resp, err, attempt)
		if !retry {
			return resp, err
		}
		if s, ok := body.(io.Seeker); ok {
			if _, err := s.Seek(0, io.SeekStart); err != nil {
				return resp, err
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, err
		case <-t.C:
		}
	}
}

// retryAfter says whether, and after how long, a request answered with resp and err is sent
// again (Client.Retries).
func (c *Client) retryAfter(req Request, body io.Reader, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	var e *Error
	if attempt >= c.Retries || resp == nil || !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		return 0, false
	}
	if _, ok := body.(io.Seeker); body != nil && !ok {
		return 0, false // a stream already sent cannot be sent again
	}
	if e.Problem.Outcome == "unknown" {
		// The write may have been applied: sent again, a PUT with a resourceVersion would
		// answer 409 and a DELETE 404 for the caller's own change. The caller reads first.
		return 0, false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
	default:
		switch e.Problem.Reason {
		case "read-only", "disk-full", "connections":
		default:
			return 0, false // it may have been half done
		}
	}
	h := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if h == "" {
		return 0, false
	}
	var wait time.Duration
	if secs, perr := strconv.Atoi(h); perr == nil && secs >= 0 {
		wait = time.Duration(secs) * time.Second
	} else if at, perr := http.ParseTime(h); perr == nil {
		wait = time.Until(at)
		if wait < 0 {
			wait = 0
		}
	} else {
		return 0, false
	}
	if wait > c.MaxRetryWait {
		return 0, false
	}
	return wait, true
}

// attempt sends req once.
func (c *Client) attempt(ctx context.Context, req Request, body io.Reader) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + req.Path
	if req.Query != nil {
		u.RawQuery = req.Query.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if req.ContentType != "" {
		hr.Header.Set("Content-Type", req.ContentType)
	}
	if hr.Header.Get("Accept") == "" {
		hr.Header.Set("Accept", "application/json")
	}
	hr.Header.Set("User-Agent", c.UserAgent)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("read %s %s response: %w", req.Method, req.Path, err)
		}
		e := &Error{Status: resp.StatusCode}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") && json.Unmarshal(b, &e.Problem) == nil {
			return resp, e
		}
		e.Body = b
		e.Lock = lockOf(resp.StatusCode, req.Path, b)
		return resp, e
	}
	return resp, nil
}

func pathEscape(s string) string { return url.PathEscape(s) }

// Health calls /healthz.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/healthz"}, nil)
	return err
}

// Ready calls /readyz and returns its warnings.
func (c *Client) Ready(ctx context.Context) ([]string, error) {
	var out struct {
		Warnings []string `json:"warnings"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/readyz"}, &out)
	return out.Warnings, err
}

// ListOptions page through lists.
type ListOptions struct {
	Limit    int
	Continue string
	// LabelSelector keeps the objects whose labels match it (Kubernetes syntax, e.g.
	// "env=prod,tier in (web,db),!retired").
	LabelSelector string
	// Org keeps the objects of a global kind that belong to this org through their org
	// reference (a node's spec.org); a kind with none refuses it (400).
	Org string
}

// TokenCreate creates a token; the answer's Secret is shown only this once.
func (c *Client) TokenCreate(ctx context.Context, req TokenCreateRequest) (Token, error) {
	var out Token
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/tokens", Body: req}, &out)
	return out, err
}

// TokenList lists the tokens the caller may read (never their secrets), following continue
// tokens to the end.
func (c *Client) TokenList(ctx context.Context) ([]Token, error) {
	items := []Token{}
	q := url.Values{}
	for {
		var page TokenList
		if _, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/tokens", Query: q}, &page); err != nil {
			return items, err
		}
		items = append(items, page.Items...)
		if page.Continue == "" {
			return items, nil
		}
		q = url.Values{"continue": {page.Continue}}
	}
}

// TokenRevoke revokes a token by id.
func (c *Client) TokenRevoke(ctx context.Context, id string) error {
	_, err := c.Do(ctx, Request{Method: http.MethodDelete, Path: "/v1/tokens/" + pathEscape(id)}, nil)
	return err
}

// AuditListOptions filter the audit log.
type AuditListOptions struct {
	Limit  int
	Before int64
	Action string
	// Continue is the Continue of the previous page (same Action); not with Before.
	Continue string
}

// AuditList reads the audit log, newest first.
// AuditFollow streams the audit log as it is written (GET /v1/audit?watch=true), calling fn
// for each record in the server's follow order (a record never arrives after one written
// later). after resumes after a record received (its Cursor); empty starts now. It returns
// when ctx ends (nil), fn fails (its error), or the server ends the stream (nil: resume from
// the last record's Cursor; an *Error when it ended with an error event).
func (c *Client) AuditFollow(ctx context.Context, after, action string, fn func(AuditRecord) error) error {
	q := url.Values{"watch": {"true"}}
	if after != "" {
		q.Set("after", after)
	}
	if action != "" {
		q.Set("action", action)
	}
	cc := *c
	hc := *c.http
	hc.Timeout = 0 // a stream: no overall timeout
	cc.http = &hc
	resp, err := cc.stream(ctx, Request{Method: http.MethodGet, Path: "/v1/audit", Query: q}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxWatchLine)
	for sc.Scan() {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("audit follow: bad line: %w", err)
		}
		if ev.Type == "ERROR" {
			e := &Error{}
			if err := json.Unmarshal(ev.Object, &e.Problem); err != nil {
				return fmt.Errorf("audit follow: bad error event: %w", err)
			}
			e.Status = e.Problem.Status
			return e
		}
		var rec AuditRecord
		if err := json.Unmarshal(ev.Object, &rec); err != nil {
			return fmt.Errorf("audit follow: bad record: %w", err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

func (c *Client) AuditList(ctx context.Context, opts AuditListOptions) (AuditList, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", fmt.Sprint(opts.Limit))
	}
	if opts.Before > 0 {
		q.Set("before", fmt.Sprint(opts.Before))
	}
	if opts.Action != "" {
		q.Set("action", opts.Action)
	}
	if opts.Continue != "" {
		q.Set("continue", opts.Continue)
	}
	var out AuditList
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/audit", Query: q}, &out)
	return out, err
}
