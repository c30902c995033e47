// Package auth owns API tokens, scopes and the audit log.
//
// A token is 256 random bits, shown once at creation and stored only as its SHA-256. A slow
// password hash would buy nothing for a secret that cannot be guessed, and Terraform and
// Salt authenticate on every request, so verification must be cheap; verified tokens are
// also cached for a few seconds (CacheTTL), which is how long a revocation may take to
// reach other replicas.
//
// A scope is "admin" or family:verb:name, e.g. orgs:read:acme, pillars:render:node/*,
// projects:write:net, state:read-outputs:net, state:force-unlock:net, kinds:register:*,
// orgs:attach:acme. Allows decides whether a principal's scopes grant one (family, verb,
// name); the implications between verbs are listed in impliedVerbs.
//
// The families whose things are of several target kinds (pillars: the global layer, orgs,
// groups and nodes; resources: objects inside an org and global objects) name the target
// kind in the scope's name (pillars:write:node/web*, resources:read:org/acme), so that one
// name never grants two kinds of target: see targets.go.
package auth

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

// TokenPrefix starts every strata token, so secret scanners and people can recognise one.
const TokenPrefix = "strata_"

// CacheTTL is how long a verified token is trusted without asking the database again.
const CacheTTL = 10 * time.Second

// Families are the resource families scopes name.
var Families = []string{"orgs", "groups", "nodes", "pillars", "projects", "state", "kinds", "resources", "tokens", "audit"}

// Verbs are the verbs scopes name; "*" grants every verb.
var Verbs = []string{"read", "read-outputs", "read-secrets", "write", "delete", "render", "lock", "force-unlock", "register", "credentials", "attach", "*"}

// outputsOnlyFamilies are the families the read-outputs verb applies to: only Terraform
// state has root outputs to show apart from the rest of a document.
var outputsOnlyFamilies = []string{"state", "*"}

// secretFamilies are the families the read-secrets verb applies to: only pillars have
// secret categories (a Terraform state is readable whole or by its outputs).
var secretFamilies = []string{"pillars", "*"}

// attachFamilies are the families the attach verb applies to: only an org has things placed
// in it by writes of other kinds (a node's spec.org).
var attachFamilies = []string{"orgs", "*"}

// Scope is one parsed grant.
type Scope struct {
	Admin  bool
	Family string
	Verb   string
	Name   string
}

// String is the scope's canonical text form.
func (s Scope) String() string {
	if s.Admin {
		return "admin"
	}
	return s.Family + ":" + s.Verb + ":" + s.Name
}

// ParseScope parses "admin" or family:verb:name. Family and verb may be "*"; name may be "*",
// an exact name, or a prefix ending in "*".
func ParseScope(s string) (Scope, error) {
	sc, err := parseScope(s)
	if err != nil {
		// The grammar is easier copied than described: every refusal ends with examples,
		// of the family the scope names when it names a known one.
		family, _, _ := strings.Cut(s, ":")
		return Scope{}, fmt.Errorf("%w; for example %s", err, scopeExamples(family))
	}
	return sc, nil
}

// scopeExamples returns well-formed scopes to copy, of family when it is a known one.
func scopeExamples(family string) string {
	switch family {
	case "pillars":
		return "pillars:read:org/acme, pillars:write:node/web*, pillars:render:*"
	case "resources":
		return "resources:read:org/acme, resources:write:global/dns*"
	case "state":
		return "state:write:net, state:read-outputs:net"
	case "orgs":
		return "orgs:read:acme, orgs:attach:acme, orgs:write:*"
	case "nodes":
		return "nodes:read:web*, nodes:write:*"
	}
	return "admin, orgs:read:acme, nodes:write:*, pillars:read:org/acme, state:write:net"
}

func parseScope(s string) (Scope, error) {
	if s == "admin" {
		return Scope{Admin: true}, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Scope{}, fmt.Errorf("scope %q: want admin or family:verb:name", s)
	}
	sc := Scope{Family: parts[0], Verb: parts[1], Name: parts[2]}
	if sc.Family != "*" && !contains(Families, sc.Family) {
		return Scope{}, fmt.Errorf("scope %q: unknown family %q (known: %s)", s, sc.Family, strings.Join(Families, ", "))
	}
	if !contains(Verbs, sc.Verb) {
		return Scope{}, fmt.Errorf("scope %q: unknown verb %q (known: %s)", s, sc.Verb, strings.Join(Verbs, ", "))
	}
	if sc.Verb == "read-outputs" && !contains(outputsOnlyFamilies, sc.Family) {
		return Scope{}, fmt.Errorf("scope %q: verb read-outputs applies only to the state family (state:read-outputs:<project>)", s)
	}
	if sc.Verb == "read-secrets" && !contains(secretFamilies, sc.Family) {
		return Scope{}, fmt.Errorf("scope %q: verb read-secrets applies only to the pillars family (pillars:read-secrets:<target>: may read the values of secret categories)", s)
	}
	if sc.Verb == "attach" && !contains(attachFamilies, sc.Family) {
		return Scope{}, fmt.Errorf("scope %q: verb attach applies only to the orgs family (orgs:attach:<org>: may place objects in the org)", s)
	}
	if err := checkScopeName(sc.Family, sc.Name); err != nil {
		return Scope{}, fmt.Errorf("scope %q: %v", s, err)
	}
	return sc, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// impliedVerbs lists, for a granted verb, the other verbs it also grants directly; implies
// follows them transitively. Writing a thing needs reading it (Terraform reads before it
// writes), and state writers must lock. Reading a whole state includes reading its outputs,
// never the reverse: read-outputs grants nothing else, which is its point. Lock grants read
// but never write: a lock only keeps others out. force-unlock and credentials are never
// implied: they override other people's work or hand out database access, so they are
// granted by name only. attach (may place objects in an org: create or move a node into it,
// or out of it) is implied by write, and grants nothing else: it is what a node operator
// needs of an org without the right to change or delete the org. read-secrets (the plaintext
// of secret pillar categories) is never implied either: read, render and write see and keep
// secrets masked, so only a grant by name, "*" or admin reveals them.
var impliedVerbs = map[string][]string{
	"write":  {"read", "lock", "delete", "attach"},
	"delete": {"read"},
	"lock":   {"read"},
	"render": {"read"},
	"read":   {"read-outputs"},
}

// grantedVerbs maps each verb to every verb it grants, itself included: impliedVerbs
// followed transitively, computed once.
var grantedVerbs = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, v := range Verbs {
		seen := map[string]bool{v: true}
		for todo := []string{v}; len(todo) > 0; {
			cur := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for _, next := range impliedVerbs[cur] {
				if !seen[next] {
					seen[next] = true
					todo = append(todo, next)
				}
			}
		}
		out[v] = seen
	}
	return out
}()

// implies reports whether granting verb granted also grants want.
func implies(granted, want string) bool { return grantedVerbs[granted][want] }

// grants reports whether the scope grants verb on the thing of family called name (its
// target-qualified name in a target family: node/web01, group/acme/web, global). It asks
// grantPattern, as the list filters do, so a point check and a list can never disagree.
func (s Scope) grants(family, verb, name string) bool {
	target, rest := splitTarget(family, name)
	pat, ok := s.grantPattern(family, verb, target)
	return ok && pat.match(rest)
}

// Principal is the authenticated caller of a request.
type Principal struct {
	TokenID string
	Name    string
	Scopes  []Scope
	// ExpiresAt is the token's expiry (nil: none), for long requests that re-check it.
	ExpiresAt *time.Time
}

// IsAdmin reports whether the principal holds the admin scope.
func (p *Principal) IsAdmin() bool {
	for _, s := range p.Scopes {
		if s.Admin {
			return true
		}
	}
	return false
}

// Allows reports whether any scope grants verb on the named thing of family.
func (p *Principal) Allows(family, verb, name string) bool {
	if p == nil {
		return false
	}
	for _, s := range p.Scopes {
		if s.grants(family, verb, name) {
			return true
		}
	}
	return false
}

// Check returns a 403 naming the scope that would be needed, or nil.
func (p *Principal) Check(family, verb, name string) error {
	if p.Allows(family, verb, name) {
		return nil
	}
	return fault.Forbidden("token %q lacks scope %s:%s:%s", p.Name, family, verb, name)
}

// Actor is how the principal is named in the audit log.
func (p *Principal) Actor() string {
	if p == nil {
		return "system"
	}
	return p.Name + " (" + p.TokenID + ")"
}

type ctxKey struct{}

// WithPrincipal returns a context carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the request's principal.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(*Principal)
	return p, ok
}

// Token is a token's record, without its secret.
type Token struct {
	ID         string
	Name       string
	Scopes     []string
	CreatedAt  time.Time
	CreatedBy  string
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

// Service verifies and manages tokens.
type Service struct {
	db *db.DB
	// now is the clock expiry is judged by (time.Now; tests inject their own, so expiry is
	// tested exactly and without waiting).
	now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cacheEntry

	// ended is what this replica revoked or signed out (endings.go): long requests check it
	// before each event they send, so a revocation here takes effect before the next one.
	ended endings

	cursorMu sync.Mutex
	cursor   cipher.AEAD // sealing continue tokens; nil until first use (cursor.go)
}

type cacheEntry struct {
	p       *Principal
	expires time.Time
}

// Option configures a Service.
type Option func(*Service)

// WithClock makes the service judge token expiry, and the cache's lifetime, by now instead
// of time.Now. The database refuses tokens past expires_at by its own clock as well, so a
// clock set behind the database's cannot revive an expired token.
func WithClock(now func() time.Time) Option {
	return func(s *Service) { s.now = now }
}

// NewService returns a token service over d.
func NewService(d *db.DB, opts ...Option) *Service {
	s := &Service{db: d, now: time.Now, cache: map[[32]byte]cacheEntry{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// ErrUnauthenticated is returned for a missing, unknown, expired or revoked token.
var ErrUnauthenticated = &fault.Error{Kind: fault.KindUnauthenticated, Detail: "a valid API token is required (Authorization: Bearer <token>, or HTTP Basic auth with the token as password)"}

// Verify resolves a presented secret to its principal.
func (s *Service) Verify(ctx context.Context, secret string) (*Principal, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return nil, ErrUnauthenticated
	}
	h := sha256.Sum256([]byte(secret))
	now := s.now()
	s.mu.Lock()
	if e, ok := s.cache[h]; ok && now.Before(e.expires) {
		s.mu.Unlock()
		return e.p, nil
	}
	s.mu.Unlock()

	var (
		p       Principal
		scopes  []string
		expires *time.Time
	)
	err := s.db.QueryRow(ctx, q.Get("TokenGetByHash"), db.Bytes(h[:])).Scan(&p.TokenID, &p.Name, &scopes, &expires)
	if errors.Is(err, db.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("verify token: %w", err)
	}
	if expires != nil && !now.Before(*expires) {
		return nil, ErrUnauthenticated
	}
	p.ExpiresAt = expires
	for _, raw := range scopes {
		sc, err := ParseScope(raw)
		if err != nil {
			continue // a scope this release does not know grants nothing
		}
		p.Scopes = append(p.Scopes, sc)
	}
	until := now.Add(CacheTTL)
	if expires != nil && expires.Before(until) {
		until = *expires
	}
	s.mu.Lock()
	if len(s.cache) > 10000 {
		s.cache = map[[32]byte]cacheEntry{}
	}
	s.cache[h] = cacheEntry{p: &p, expires: until}
	s.mu.Unlock()
	_, _ = s.db.Exec(ctx, q.Get("TokenTouch"), p.TokenID)
	return &p, nil
}

// NewSecret returns a fresh token secret: the prefix and 256 random bits, base64url.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func newTokenID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "tok_" + hex.EncodeToString(b)
}

// CreateParams describe a new token.
type CreateParams struct {
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
	// Secret, when set, is used instead of a random one (STRATA_BOOTSTRAP_TOKEN).
	Secret string
}

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,99}$`)

func (c *CreateParams) validate(now time.Time) error {
	if !tokenNameRE.MatchString(c.Name) {
		return fault.Invalid("/name", "token name must be 1-100 characters of letters, digits, '_', '.', '@', '-', starting with a letter or digit")
	}
	if len(c.Scopes) == 0 {
		return fault.Invalid("/scopes", "at least one scope is required")
	}
	for i, s := range c.Scopes {
		if _, err := ParseScope(s); err != nil {
			return fault.Invalid(fmt.Sprintf("/scopes/%d", i), "%v", err)
		}
	}
	if c.ExpiresAt != nil {
		// The database keeps microseconds; the record returned must be the one stored.
		at := c.ExpiresAt.Truncate(time.Microsecond)
		c.ExpiresAt = &at
		if !at.After(now) {
			return fault.Invalid("/expiresAt", "expiry must be in the future")
		}
	}
	if c.Secret != "" {
		if err := ValidateSecret(c.Secret); err != nil {
			return fault.Invalid("/secret", "%v", err)
		}
	}
	return nil
}

// ValidateSecret checks a token chosen by an operator (STRATA_BOOTSTRAP_TOKEN): it must look
// like strata's own tokens and carry enough characters to be unguessable.
func ValidateSecret(secret string) error {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) < len(TokenPrefix)+32 || len(secret) > 200 {
		return fmt.Errorf("a token must start with %q and carry 32 to %d more characters (e.g. %q plus 43 random base64url characters)", TokenPrefix, 200-len(TokenPrefix), TokenPrefix)
	}
	return nil
}

// Create stores a new token and returns its record and its secret, which is never shown
// again. The creation is audited in the same transaction.
func (s *Service) Create(ctx context.Context, actor AuditActor, p CreateParams) (Token, string, error) {
	var tok Token
	secret := p.Secret
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var err error
		tok, secret, err = createTx(ctx, tx, actor, p, s.now())
		return err
	})
	return tok, secret, err
}

func createTx(ctx context.Context, tx *db.Tx, actor AuditActor, p CreateParams, now time.Time) (Token, string, error) {
	if err := p.validate(now); err != nil {
		return Token{}, "", err
	}
	secret := p.Secret
	if secret == "" {
		secret = NewSecret()
	}
	// Names are unique among live tokens (neither revoked nor expired): a name is how people
	// and tokens:<verb>:<name> scopes tell tokens apart. Tokens an older release let share a
	// name keep it until they are revoked.
	if _, err := tx.Exec(ctx, q.Get("TokenNameLock"), p.Name); err != nil {
		return Token{}, "", err
	}
	var existing string
	switch err := tx.QueryRow(ctx, q.Get("TokenLiveByName"), p.Name).Scan(&existing); {
	case err == nil:
		return Token{}, "", &fault.Error{Kind: fault.KindConflict,
			Detail: fmt.Sprintf("a live token named %q exists already (%s): choose another name, or revoke that one first", p.Name, existing),
			Fields: []fault.FieldError{{Field: "/name", Message: "taken by " + existing}}}
	case !errors.Is(err, db.ErrNotFound):
		return Token{}, "", err
	}
	h := sha256.Sum256([]byte(secret))
	tok := Token{ID: newTokenID(), Name: p.Name, Scopes: p.Scopes, CreatedBy: actor.Actor, ExpiresAt: p.ExpiresAt}
	if err := tx.QueryRow(ctx, q.Get("TokenInsert"), tok.ID, tok.Name, db.Bytes(h[:]), tok.Scopes, tok.CreatedBy, tok.ExpiresAt).Scan(&tok.CreatedAt); err != nil {
		if errors.Is(err, db.ErrConflict) {
			return Token{}, "", fault.Conflict("a token with this secret exists already")
		}
		return Token{}, "", fmt.Errorf("insert token: %w", err)
	}
	err := RecordAudit(ctx, tx, AuditEntry{Actor: actor.Actor, RemoteAddr: actor.RemoteAddr, Action: "token.create",
		Target: tok.ID, Detail: map[string]any{"name": tok.Name, "scopes": tok.Scopes, "expiresAt": tok.ExpiresAt}})
	return tok, secret, err
}

// TokenPos is a position in the token list: the last token of a page.
type TokenPos struct {
	CreatedAt time.Time `json:"t"`
	ID        string    `json:"i"`
}

// TokenListOptions page through the tokens a caller may see.
type TokenListOptions struct {
	// Filter restricts the list to token names the caller may read (tokens:read:<name>).
	Filter Filter
	// After is the last token of the previous page (nil: from the start).
	After *TokenPos
	// Limit is the page size; 0 means no limit.
	Limit int
}

// List returns the tokens opts.Filter lets through, revoked ones included, oldest first,
// and whether more follow the page.
func (s *Service) List(ctx context.Context, opts TokenListOptions) ([]Token, bool, error) {
	var (
		afterAt *time.Time
		afterID string
	)
	if opts.After != nil {
		afterAt, afterID = &opts.After.CreatedAt, opts.After.ID
	}
	var limit *int
	if opts.Limit > 0 {
		n := opts.Limit + 1
		limit = &n
	}
	f := opts.Filter
	rows, err := s.db.Query(ctx, q.Get("TokenList"), f.All, f.Names, f.Prefixes, afterAt, afterID, limit)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		if err := rows.Scan(&t.ID, &t.Name, &t.Scopes, &t.CreatedAt, &t.CreatedBy, &t.ExpiresAt, &t.RevokedAt, &t.LastUsedAt); err != nil {
			return nil, false, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if opts.Limit > 0 && len(out) > opts.Limit {
		return out[:opts.Limit], true, nil
	}
	return out, false, nil
}

// Revoke revokes a token. Its cached verification on this replica is dropped at once; other
// replicas drop theirs within CacheTTL.
func (s *Service) Revoke(ctx context.Context, actor AuditActor, id string) error {
	// Marked before the revocation commits, so no event committed after it can reach a
	// stream of this token on this replica (EndedHere); unmarked if nothing was revoked.
	undo := s.ended.mark(tokenKey(id))
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		n, err := tx.Exec(ctx, q.Get("TokenRevoke"), id)
		if err != nil {
			return err
		}
		if n == 0 {
			var revoked bool
			err := tx.QueryRow(ctx, q.Get("TokenExists"), id).Scan(&revoked)
			if errors.Is(err, db.ErrNotFound) {
				return fault.NotFound("token %q not found", id)
			}
			if err != nil {
				return err
			}
			return nil // revoking twice is not an error
		}
		return RecordAudit(ctx, tx, AuditEntry{Actor: actor.Actor, RemoteAddr: actor.RemoteAddr, Action: "token.revoke", Target: id})
	})
	if err != nil {
		undo()
		return err
	}
	s.mu.Lock()
	for h, e := range s.cache {
		if e.p.TokenID == id {
			delete(s.cache, h)
		}
	}
	s.mu.Unlock()
	return nil
}

// Bootstrap creates the first admin token exactly once per installation, however many
// replicas start at the same moment: the replica whose claim row lands creates it, in the
// same transaction. It returns the secret when this call created it ("" otherwise). When
// secret is given (STRATA_BOOTSTRAP_TOKEN) it is used instead of a random one, so every
// replica can be handed the same admin token.
func (s *Service) Bootstrap(ctx context.Context, secret string) (string, error) {
	var created string
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		n, err := tx.Exec(ctx, q.Get("BootstrapClaim"), "admin-token", s.now().UTC().Format(time.RFC3339))
		if err != nil || n == 0 {
			return err
		}
		_, sec, err := createTx(ctx, tx, AuditActor{Actor: "system"}, CreateParams{Name: "admin", Scopes: []string{"admin"}, Secret: secret}, s.now())
		created = sec
		return err
	})
	return created, err
}

// AuditActor names who acts and from where.
type AuditActor struct {
	Actor      string
	RemoteAddr string
	// RequestID is the id of the HTTP request the action belongs to ("" outside requests):
	// always the server's own.
	RequestID string
	// ClientRequestID is the X-Request-Id the client sent, if any, kept apart from RequestID
	// so that no client can make its records look like another request's.
	ClientRequestID string
}

type auditActorKey struct{}

// WithAuditActor returns ctx carrying who acts in it, for the records every write makes
// (the audit log, the changes log) however deep in the capability packages it happens.
func WithAuditActor(ctx context.Context, a AuditActor) context.Context {
	return context.WithValue(ctx, auditActorKey{}, a)
}

// AuditActorFrom returns who acts in ctx (the zero AuditActor outside a request).
func AuditActorFrom(ctx context.Context) AuditActor {
	a, _ := ctx.Value(auditActorKey{}).(AuditActor)
	return a
}

// AuditEntry is one audit record.
type AuditEntry struct {
	Actor      string
	Action     string
	Target     string
	RemoteAddr string
	// RequestID is the HTTP request's id; RecordAudit and AuditStep fill it, ClientRequestID
	// and an empty RemoteAddr from the context's AuditActor.
	RequestID       string
	ClientRequestID string
	Detail          any
	// OnlyIfWrote writes the record only if an earlier statement of the transaction set
	// strata.wrote to 'yes' (set_config('strata.wrote', 'yes', true)): for the record of a
	// write that may find nothing to write, sent behind it in one pipeline (resource: a stamp
	// whose copy of the object was overtaken).
	OnlyIfWrote bool
}

// RecordAudit writes e in the caller's transaction, so the record exists exactly when the
// change it describes does.
func RecordAudit(ctx context.Context, qr db.Querier, e AuditEntry) error {
	step, err := AuditStep(ctx, e)
	if err != nil {
		return err
	}
	if _, err := qr.Exec(ctx, step.Query, step.Args...); err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	return nil
}

// AuditStep is RecordAudit as a step of a pipeline (db.Tx.Pipeline), for a write that sends
// its audit record in the same round trip as its last statements.
func AuditStep(ctx context.Context, e AuditEntry) (db.Step, error) {
	from := AuditActorFrom(ctx)
	if e.RequestID == "" {
		e.RequestID, e.ClientRequestID = from.RequestID, from.ClientRequestID
	}
	if e.RemoteAddr == "" {
		e.RemoteAddr = from.RemoteAddr
	}
	detail := []byte("{}")
	if e.Detail != nil {
		b, err := json.Marshal(e.Detail)
		if err != nil {
			return db.Step{}, fmt.Errorf("audit detail: %w", err)
		}
		detail = b
	}
	return db.Step{Query: q.Get("AuditInsert"), Args: []any{e.Actor, e.Action, e.Target, e.RemoteAddr, detail, e.RequestID, e.ClientRequestID, e.OnlyIfWrote}}, nil
}

// AuditCursor is a position in the audit log's follow order: (transaction id, record id),
// written "<xact>.<id>".
type AuditCursor struct {
	Xact string
	ID   int64
}

func (c AuditCursor) String() string { return c.Xact + "." + strconv.FormatInt(c.ID, 10) }

// ParseAuditCursor reads a cursor a follower sent back (the `cursor` of a record it got).
func ParseAuditCursor(s string) (AuditCursor, error) {
	x, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || n < 0 || x == "" || strings.Trim(x, "0123456789") != "" || len(x) > 20 {
		return AuditCursor{}, fault.Invalid("after", "after must be the cursor of an audit record this server sent, not %q", fault.Truncate(s, 40))
	}
	return AuditCursor{Xact: x, ID: n}, nil
}

// AuditFollowStart is the cursor of a follow that starts now.
func (s *Service) AuditFollowStart(ctx context.Context) (AuditCursor, error) {
	var x string
	err := s.db.QueryRow(ctx, q.Get("AuditFollowStart")).Scan(&x)
	return AuditCursor{Xact: x}, err
}

// FollowAudit returns up to limit records after cur in follow order (AuditFollow), each with
// its cursor, and the cursor after the last. A record never appears before one already
// returned, whatever order transactions commit in.
func (s *Service) FollowAudit(ctx context.Context, cur AuditCursor, actionPrefix string, limit int) ([]AuditRecord, AuditCursor, error) {
	rows, err := s.db.Query(ctx, q.Get("AuditFollow"), cur.Xact, cur.ID, actionPrefix, limit)
	if err != nil {
		return nil, cur, err
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var (
			r      AuditRecord
			detail []byte
		)
		if err := rows.Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Target, &r.RemoteAddr, &detail, &r.RequestID, &r.ClientRequestID, &r.Cursor.Xact); err != nil {
			return nil, cur, err
		}
		r.Detail = detail
		r.Cursor.ID = r.ID
		cur = r.Cursor
		out = append(out, r)
	}
	return out, cur, rows.Err()
}

// AuditRecord is a stored audit entry.
type AuditRecord struct {
	ID         int64
	At         time.Time
	Actor      string
	Action     string
	Target     string
	RemoteAddr string
	RequestID  string
	// ClientRequestID is the X-Request-Id the client sent, if any (RequestID is the server's).
	ClientRequestID string
	// Cursor is the record's place in follow order (FollowAudit only).
	Cursor AuditCursor
	Detail json.RawMessage
}

// ListAudit returns up to limit records older than before (0: newest), newest first,
// optionally only actions starting with actionPrefix.
func (s *Service) ListAudit(ctx context.Context, before int64, actionPrefix string, limit int) ([]AuditRecord, error) {
	var rows db.Rows
	var err error
	if actionPrefix == "" {
		rows, err = s.db.Query(ctx, q.Get("AuditList"), before, limit)
	} else {
		rows, err = s.db.Query(ctx, q.Get("AuditListAction"), before, actionPrefix, actionPrefix+string(utf8.MaxRune), limit)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var r AuditRecord
		var detail []byte
		if err := rows.Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Target, &r.RemoteAddr, &detail, &r.RequestID, &r.ClientRequestID); err != nil {
			return nil, err
		}
		r.Detail = detail
		out = append(out, r)
	}
	return out, rows.Err()
}
