// Package resource owns strata's object model: orgs, groups, nodes and user kinds, stored in
// one resources table with their labels and annotations.
//
// Every change runs in one transaction that ends with ResourceStamp: it draws the change's
// resourceVersion from next_resource_version() (which serializes writers only from that
// point to commit, so versions become visible in increasing order) and appends the change to
// the changes table that watch resumes from. Optimistic concurrency compares the stored
// resourceVersion under a row lock (SELECT … FOR UPDATE), so a stale writer gets a conflict,
// never a lost update; creation races end on the (kind, org, name) unique constraint.
package resource

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/metadata"
)

//go:embed queries.sql
var queryFS embed.FS

var q = db.MustParseQueries(queryFS, "queries.sql")

// KindOrg is the kind of organisations, a global kind (org ”).
const KindOrg = "Org"

// MaxListLimit caps one page of a list.
const MaxListLimit = 1000

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidateName checks a resource name: a DNS label (lower-case alphanumerics and '-', at most
// 63 characters), so names are safe in URLs, scopes and label values.
func ValidateName(name string) error {
	if len(name) > 63 || !dnsLabelRE.MatchString(name) {
		return fault.Invalid("/metadata/name", "name %q must be 1-63 lower-case alphanumerics or '-', starting and ending with an alphanumeric", truncate(name, 80))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Ref identifies one object.
type Ref struct {
	Kind string
	Org  string
	Name string
}

// Service reads and writes objects.
type Service struct {
	db *db.DB
}

// NewService returns a Service over d.
func NewService(d *db.DB) *Service { return &Service{db: d} }

// normalize validates an incoming object for ref and fills defaults.
func normalize(ref Ref, obj *client.Object) error {
	if obj.Kind != "" && obj.Kind != ref.Kind {
		return fault.Invalid("/kind", "kind %q does not match the endpoint's kind %q", truncate(obj.Kind, 80), ref.Kind)
	}
	obj.Kind = ref.Kind
	if obj.Metadata.Name == "" {
		obj.Metadata.Name = ref.Name
	}
	if obj.Metadata.Name != ref.Name {
		return fault.Invalid("/metadata/name", "name %q does not match the name in the URL %q", truncate(obj.Metadata.Name, 80), ref.Name)
	}
	if err := ValidateName(ref.Name); err != nil {
		return err
	}
	if obj.Metadata.Org != "" && obj.Metadata.Org != ref.Org {
		return fault.Invalid("/metadata/org", "org %q does not match %q", truncate(obj.Metadata.Org, 80), ref.Org)
	}
	obj.Metadata.Org = ref.Org
	if obj.Metadata.Labels == nil {
		obj.Metadata.Labels = map[string]string{}
	}
	if obj.Metadata.Annotations == nil {
		obj.Metadata.Annotations = map[string]string{}
	}
	if err := metadata.Validate(obj.Metadata.Labels, obj.Metadata.Annotations); err != nil {
		return err
	}
	if len(obj.Spec) == 0 || string(obj.Spec) == "null" {
		obj.Spec = json.RawMessage("{}")
	}
	spec, err := canonicalSpec(obj.Spec)
	if err != nil {
		return err
	}
	obj.Spec = spec
	return nil
}

// canonicalSpec checks that spec is a JSON object PostgreSQL's jsonb can store and returns
// it re-encoded: numbers keep their exact text, strings become valid UTF-8. The NUL
// character cannot be stored in jsonb, so it is refused with the path of the offending value
// rather than failing in the database.
func canonicalSpec(raw json.RawMessage) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, fault.Invalid("/spec", "spec must be valid UTF-8 (invalid bytes would be stored as U+FFFD)")
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fault.Invalid("/spec", "spec is not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fault.Invalid("/spec", "spec must be a JSON object")
	}
	if err := checkDepth(v, 0); err != nil {
		return nil, fault.Invalid("/spec", "%v", err)
	}
	if path, ok := findNUL(v, "/spec"); ok {
		return nil, fault.Invalid(path, "must not contain the NUL character (\\u0000), which PostgreSQL cannot store")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fault.Invalid("/spec", "%v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// findNUL returns the JSON pointer of the first string or key holding a NUL character.
func findNUL(v any, path string) (string, bool) {
	switch t := v.(type) {
	case string:
		return path, strings.ContainsRune(t, 0)
	case map[string]any:
		for k, c := range t {
			p := path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if strings.ContainsRune(k, 0) {
				return p, true
			}
			if p, ok := findNUL(c, p); ok {
				return p, true
			}
		}
	case []any:
		for i, c := range t {
			if p, ok := findNUL(c, fmt.Sprintf("%s/%d", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// Create stores a new object; 409 when it exists.
func (s *Service) Create(ctx context.Context, ref Ref, obj client.Object) (client.Object, error) {
	if err := normalize(ref, &obj); err != nil {
		return client.Object{}, err
	}
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, q.Get("ResourceInsert"), ref.Kind, ref.Org, ref.Name, []byte(obj.Spec)).Scan(&id)
		if errors.Is(err, db.ErrConflict) {
			return fault.Conflict("%s %q already exists", ref.Kind, ref.Name)
		}
		if err != nil {
			return err
		}
		return writeMetaAndStamp(ctx, tx, id, "ADDED", obj)
	})
	if err != nil {
		return client.Object{}, err
	}
	return s.Get(ctx, ref)
}

func writeMetaAndStamp(ctx context.Context, tx *db.Tx, id int64, changeType string, obj client.Object) error {
	p, n, v := metadata.Split(obj.Metadata.Labels)
	if _, err := tx.Exec(ctx, q.Get("LabelsReplace"), id, p, n, v); err != nil {
		return fmt.Errorf("write labels: %w", err)
	}
	p, n, v = metadata.Split(obj.Metadata.Annotations)
	if _, err := tx.Exec(ctx, q.Get("AnnotationsReplace"), id, p, n, v); err != nil {
		return fmt.Errorf("write annotations: %w", err)
	}
	obj.Metadata.ResourceVersion = ""
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var rv int64
	if err := tx.QueryRow(ctx, q.Get("ResourceStamp"), id, changeType, body).Scan(&rv); err != nil {
		return fmt.Errorf("stamp change: %w", err)
	}
	return nil
}

// Get reads one object.
func (s *Service) Get(ctx context.Context, ref Ref) (client.Object, error) {
	return get(ctx, s.db, ref)
}

func get(ctx context.Context, qr db.Querier, ref Ref) (client.Object, error) {
	obj, err := scanObject(ref.Kind, qr.QueryRow(ctx, q.Get("ResourceGet"), ref.Kind, ref.Org, ref.Name))
	if errors.Is(err, db.ErrNotFound) {
		return client.Object{}, fault.NotFound("%s %q not found", ref.Kind, ref.Name)
	}
	return obj, err
}

func scanObject(kind string, row db.Row) (client.Object, error) {
	var (
		obj                 client.Object
		spec, labels, annos []byte
		rv                  int64
		created, updated    time.Time
	)
	if err := row.Scan(&obj.Metadata.Name, &obj.Metadata.Org, &spec, &rv, &created, &updated, &labels, &annos); err != nil {
		return client.Object{}, err
	}
	obj.Kind = kind
	obj.Spec = spec
	obj.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
	created, updated = created.UTC(), updated.UTC()
	obj.Metadata.CreatedAt, obj.Metadata.UpdatedAt = &created, &updated
	if err := json.Unmarshal(labels, &obj.Metadata.Labels); err != nil {
		return client.Object{}, err
	}
	if err := json.Unmarshal(annos, &obj.Metadata.Annotations); err != nil {
		return client.Object{}, err
	}
	return obj, nil
}

// ListOptions page through a list.
type ListOptions struct {
	Limit int
	// After is the last name of the previous page ("" for the first page). The caller gets
	// it from an opaque continue token (auth.OpenCursor); names never reach clients here.
	After string
	// Filter restricts the list to the names the caller may see. It is applied in the
	// query, so every page holds only visible rows.
	Filter auth.Filter
}

// List returns a page of the objects of kind in org that opts.Filter lets through, ordered
// by name (bytewise), and the page's last name when more follow ("" otherwise).
func (s *Service) List(ctx context.Context, kind, org string, opts ListOptions) (client.ObjectList, string, error) {
	limit := opts.Limit
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	out := client.ObjectList{Items: []client.Object{}}
	var rv int64
	if err := s.db.QueryRow(ctx, q.Get("ResourceVersionCurrent")).Scan(&rv); err != nil {
		return out, "", err
	}
	out.ResourceVersion = strconv.FormatInt(rv, 10)
	f := opts.Filter
	rows, err := s.db.Query(ctx, q.Get("ResourceList"), kind, org, opts.After, limit+1, f.All, f.Names, f.Prefixes)
	if err != nil {
		return out, "", err
	}
	defer rows.Close()
	for rows.Next() {
		obj, err := scanObject(kind, rows)
		if err != nil {
			return out, "", err
		}
		out.Items = append(out.Items, obj)
	}
	if err := rows.Err(); err != nil {
		return out, "", err
	}
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
		return out, out.Items[limit-1].Metadata.Name, nil
	}
	return out, "", nil
}

// lockForWrite locks the stored row and checks the caller's expected resourceVersion ("" =
// no precondition).
func lockForWrite(ctx context.Context, tx *db.Tx, ref Ref, expected string) (int64, error) {
	var id, rv int64
	err := tx.QueryRow(ctx, q.Get("ResourceGetForUpdate"), ref.Kind, ref.Org, ref.Name).Scan(&id, &rv)
	if errors.Is(err, db.ErrNotFound) {
		return 0, fault.NotFound("%s %q not found", ref.Kind, ref.Name)
	}
	if err != nil {
		return 0, err
	}
	if expected != "" {
		if n, err := strconv.ParseInt(expected, 10, 64); err != nil || n < 1 {
			return 0, fault.Invalid("/metadata/resourceVersion", "resourceVersion must be a resourceVersion this server issued (a positive decimal integer), not %q", truncate(expected, 40))
		}
	}
	if expected != "" && expected != strconv.FormatInt(rv, 10) {
		return 0, fault.Conflict("%s %q has been modified: resourceVersion is %d, the request expected %s; read it again and retry", ref.Kind, ref.Name, rv, truncate(expected, 40))
	}
	return id, nil
}

// Replace overwrites an existing object (PUT). A non-empty metadata.resourceVersion must
// match the stored one (409 otherwise); one that is not a number is a 400.
func (s *Service) Replace(ctx context.Context, ref Ref, obj client.Object) (client.Object, error) {
	if err := normalize(ref, &obj); err != nil {
		return client.Object{}, err
	}
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		id, err := lockForWrite(ctx, tx, ref, obj.Metadata.ResourceVersion)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("ResourceUpdateSpec"), id, []byte(obj.Spec)); err != nil {
			return err
		}
		return writeMetaAndStamp(ctx, tx, id, "MODIFIED", obj)
	})
	if err != nil {
		return client.Object{}, err
	}
	return s.Get(ctx, ref)
}

// Patch applies an RFC 7396 JSON merge patch to the object's metadata (labels,
// annotations) and spec, under the row lock, so concurrent patches compose instead of
// overwriting each other. A resourceVersion in the patch is a precondition.
func (s *Service) Patch(ctx context.Context, ref Ref, patch []byte) (client.Object, error) {
	var pre struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &pre); err != nil {
		return client.Object{}, fault.Invalid("", "the merge patch must be a JSON object: %v", err)
	}
	err := s.db.InTx(ctx, func(tx *db.Tx) error {
		id, err := lockForWrite(ctx, tx, ref, pre.Metadata.ResourceVersion)
		if err != nil {
			return err
		}
		cur, err := get(ctx, tx, ref)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(map[string]any{
			"kind":     cur.Kind,
			"metadata": map[string]any{"name": cur.Metadata.Name, "org": cur.Metadata.Org, "labels": cur.Metadata.Labels, "annotations": cur.Metadata.Annotations},
			"spec":     cur.Spec,
		})
		if err != nil {
			return err
		}
		merged, err := MergePatch(doc, patch)
		if err != nil {
			return fault.Invalid("", "%v", err)
		}
		var next client.Object
		dec := json.NewDecoder(bytesReader(merged))
		if err := dec.Decode(&next); err != nil {
			return fault.Invalid("/metadata", "the patched object is not valid: %v", err)
		}
		next.Metadata.ResourceVersion = ""
		if err := normalize(ref, &next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("ResourceUpdateSpec"), id, []byte(next.Spec)); err != nil {
			return err
		}
		return writeMetaAndStamp(ctx, tx, id, "MODIFIED", next)
	})
	if err != nil {
		return client.Object{}, err
	}
	return s.Get(ctx, ref)
}

// Delete removes an object (its labels and annotations cascade). A non-empty expected
// resourceVersion is a precondition.
func (s *Service) Delete(ctx context.Context, ref Ref, expected string) error {
	return s.db.InTx(ctx, func(tx *db.Tx) error {
		id, err := lockForWrite(ctx, tx, ref, expected)
		if err != nil {
			return err
		}
		last, err := get(ctx, tx, ref)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("ResourceDelete"), id); err != nil {
			return err
		}
		last.Metadata.ResourceVersion = ""
		body, err := json.Marshal(last)
		if err != nil {
			return err
		}
		var rv int64
		return tx.QueryRow(ctx, q.Get("ResourceStampDeleted"), ref.Kind, ref.Org, ref.Name, body).Scan(&rv)
	})
}
