package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/kind"
	"github.com/stratahq/strata/internal/pillar"
	"github.com/stratahq/strata/internal/resource"
)

// The OpenAPI 3.1 document (GET /v1/openapi.json, `strata openapi`) is derived, not written:
// its paths are the route table's rows (API.table, the same rows the server registers), each
// object route's schemas come from its kind descriptor (the built-in kinds' shipped schemas),
// and every body schema is generated from the Go wire type the handler encodes (schemaGen).
// What the table cannot say — a route's query parameters, its body's Go type, its success
// statuses — is in opDocs below, keyed by the route's pattern; a route without an entry is a
// build error of the document (OpenAPIDocument fails), so a route cannot be added without it.
// TestOpenAPIConformance checks every request and answer of the HTTP test suite against the
// document, so the entries cannot drift from what the handlers do.
//
// User-defined kinds are described generically (their objects' spec is any JSON object, at
// /v1/resources/{kind} and /v1/orgs/{org}/resources/{kind}): the document is served without a
// token, and naming the registered kinds there would tell an anonymous caller what an
// installation manages. A kind's schema is at the authenticated GET /v1/kinds/{kind}. The
// document therefore depends on the release alone, never on the database, and `strata openapi`
// writes the same one offline.

// OpenAPIPath is the one /v1 route served without a token.
const OpenAPIPath = "/v1/openapi.json"

// opDoc describes one route for the document.
type opDoc struct {
	summary string
	// query names the query parameters the handler reads (described in queryDocs).
	query []string
	// body is the request body (nil: none).
	body *bodyDoc
	// ok maps each success status to its body (nil: no body).
	ok map[int]*bodyDoc
	// errs are the problem statuses the route answers beyond commonErrors.
	errs []int
	// headers are request headers the handler reads (described in headerDocs).
	headers []string
	// lockBody says a 423 answers the holder's LockInfo (Terraform's http backend protocol)
	// rather than a problem document.
	lockBody bool
}

// bodyDoc is one body: its media type and either a Go wire type or a literal schema.
type bodyDoc struct {
	ct     string
	typ    reflect.Type
	schema map[string]any
	desc   string
	// also are the body's other media types (a watch's NDJSON beside a list's JSON).
	also []*bodyDoc
}

// withAlso returns b with other media types it may come as.
func (b *bodyDoc) withAlso(o ...*bodyDoc) *bodyDoc {
	c := *b
	c.also = append(c.also, o...)
	return &c
}

// ndjsonLines is an NDJSON body of which schema describes each line.
func ndjsonLines(s map[string]any) *bodyDoc { return &bodyDoc{ct: "application/x-ndjson", schema: s} }

// watchLines is a watch's or a follow's NDJSON stream of WatchEvent lines.
var watchLines = ndjsonLines(map[string]any{"$ref": "#/components/schemas/WatchEvent"})

func jsonOf[T any]() *bodyDoc { return &bodyDoc{ct: "application/json", typ: reflect.TypeFor[T]()} }

func jsonSchema(s map[string]any) *bodyDoc { return &bodyDoc{ct: "application/json", schema: s} }

func ndjsonOf[T any](desc string) *bodyDoc {
	return &bodyDoc{ct: "application/x-ndjson", typ: reflect.TypeFor[T](), desc: desc}
}

// anyObject is any JSON object; mergePatch an RFC 7396 merge patch (any JSON value: null or
// a non-object replaces the whole target).
var (
	anyObject  = map[string]any{"type": "object"}
	mergePatch = map[string]any{"description": "A JSON merge patch (RFC 7396)."}
)

// itemsOf is the {"items": [T]} answer of the lists that do not page.
func itemsOf[T any]() *bodyDoc {
	return &bodyDoc{ct: "application/json", typ: reflect.TypeFor[struct {
		Items []T `json:"items"`
	}]()}
}

// stateResult is the answer of a state write or restore.
type stateResult struct {
	Version   int64 `json:"version"`
	Unchanged bool  `json:"unchanged"`
}

// pillarListItem is one row of a target's list of categories (pillarList).
type pillarListItem struct {
	Target    string `json:"target"`
	Category  string `json:"category"`
	Revision  int64  `json:"revision"`
	UpdatedAt string `json:"updatedAt"`
	UpdatedBy string `json:"updatedBy"`
}

// commonErrors are the problem statuses every authenticated route may answer: a bad
// parameter, no or a bad token, a missing scope (or a cross-site request), a missing thing,
// a failure, and a database that cannot serve.
var commonErrors = []int{400, 401, 403, 404, 500, 503}

// writeErrors are what a body-carrying write adds: a too large body, a conflict, a failed
// If-Match, a well-formed but refused body.
var writeErrors = []int{409, 412, 413, 422}

// queryDocs describe the query parameters by name (the same name means the same thing on
// every route).
var queryDocs = map[string]map[string]any{
	"limit":           {"description": "The most items a page holds.", "schema": map[string]any{"type": "integer", "minimum": 1}},
	"continue":        {"description": "The continue token of the previous page (opaque).", "schema": map[string]any{"type": "string"}},
	"labelSelector":   {"description": "Keep the objects whose labels match (Kubernetes syntax: env=prod,tier in (web,db),!retired).", "schema": map[string]any{"type": "string"}},
	"org":             {"description": "Keep what belongs to this org.", "schema": map[string]any{"type": "string"}},
	"watch":           {"description": "true streams changes as application/x-ndjson events instead of answering a page.", "schema": map[string]any{"type": "boolean"}},
	"resourceVersion": {"description": "A watch: stream the changes after this version. A delete: delete only if the object is still at this version.", "schema": map[string]any{"type": "string"}},
	"cascade":         {"description": "true deletes what depends on the object with it.", "schema": map[string]any{"type": "boolean"}},
	"before":          {"description": "Page backwards from this id (exclusive).", "schema": map[string]any{"type": "integer"}},
	"action":          {"description": "Keep the records of this action.", "schema": map[string]any{"type": "string"}},
	"after":           {"description": "A follow: resume after this record's cursor.", "schema": map[string]any{"type": "string"}},
	"ID":              {"description": "The lock ID the writer holds (Terraform's http backend).", "schema": map[string]any{"type": "string"}},
	"force":           {"description": "true removes what another holder's lock protects (needs state:force-unlock).", "schema": map[string]any{"type": "boolean"}},
	"dryRun":          {"description": "true answers what the request would do and changes nothing.", "schema": map[string]any{"type": "boolean"}},
	"explain":         {"description": "true answers {pillar, explain}: where each value came from.", "schema": map[string]any{"type": "boolean"}},
	"format":          {"description": "ndjson: the sync stream instead of a Salt pillar tree.", "schema": map[string]any{"type": "string", "enum": []any{"ndjson"}}},
	"skipUnsupported": {"description": "true imports what it can and reports the rest instead of refusing the whole tree.", "schema": map[string]any{"type": "boolean"}},
	"file":            {"description": "The file name of the body, for the places a problem names.", "schema": map[string]any{"type": "string"}},
	"writes":          {"description": "true also requires that the database accepts writes.", "schema": map[string]any{"type": "boolean"}},
}

// headerDocs describe the request headers routes read.
var headerDocs = map[string]map[string]any{
	"If-Match":      {"description": "Change only if the current ETag is this one (412 otherwise).", "schema": map[string]any{"type": "string"}},
	"If-None-Match": {"description": "Answer 304 if the ETag is still this one.", "schema": map[string]any{"type": "string"}},
	"Content-MD5":   {"description": "The base64 MD5 of the body; a mismatch is refused.", "schema": map[string]any{"type": "string"}},
	"Cache-Control": {"description": "no-cache renders afresh instead of from this replica's cache.", "schema": map[string]any{"type": "string"}},
}

// opDocs returns the description of every route that is not an object route of a kind
// (those come from the descriptors, kindDocs).
func opDocs() map[string]opDoc {
	noBody := (*bodyDoc)(nil)
	stateDoc := jsonSchema(map[string]any{"description": "A Terraform/OpenTofu state document (a JSON object), stored as sent, and answered as stored (or its outputs only, for a token with state:read-outputs alone)."})
	lockInfo := jsonOf[api.LockInfo]()
	d := map[string]opDoc{
		"POST /v1/tokens":        {summary: "Create a token (its secret is answered only this once)", body: jsonOf[api.TokenCreateRequest](), ok: map[int]*bodyDoc{201: jsonOf[api.Token]()}, errs: writeErrors},
		"GET /v1/tokens":         {summary: "List the tokens the caller may read", query: []string{"limit", "continue"}, ok: map[int]*bodyDoc{200: jsonOf[api.TokenList]()}},
		"DELETE /v1/tokens/{id}": {summary: "Revoke a token", ok: map[int]*bodyDoc{204: noBody}},
		"GET /v1/audit": {summary: "Read the audit log, newest first, or follow it (watch=true)", query: []string{"limit", "before", "action", "continue", "watch", "after"},
			ok: map[int]*bodyDoc{200: (&bodyDoc{ct: "application/json", typ: reflect.TypeFor[api.AuditList](), desc: "with watch=true: application/x-ndjson, one {type, object} line per record"}).withAlso(watchLines)}},
		"GET /v1/status": {summary: "The database checks of `strata doctor` (admin)", ok: map[int]*bodyDoc{200: jsonSchema(anyObject)}},
		"GET /v1/keys":   {summary: "The encryption keys and what references them (admin)", ok: map[int]*bodyDoc{200: jsonOf[api.KeyStatus]()}},
		"POST /v1/keys:rotate": {summary: "Re-wrap a batch of values with the primary key (admin)", body: jsonOf[struct {
			Limit int `json:"limit,omitempty"`
		}](), ok: map[int]*bodyDoc{200: jsonOf[api.KeyRotation]()}, errs: writeErrors},

		"GET /v1/projects": {summary: "List the Terraform/OpenTofu projects", query: []string{"limit", "continue"}, ok: map[int]*bodyDoc{200: jsonOf[api.ProjectList]()}},
		"PUT /v1/projects/{project}": {summary: "Create a project", body: jsonOf[struct {
			Encryption bool `json:"encryption,omitempty"`
		}](), ok: map[int]*bodyDoc{200: jsonOf[api.Project](), 201: jsonOf[api.Project]()}, errs: writeErrors},
		"GET /v1/projects/{project}":                                {summary: "Read a project", ok: map[int]*bodyDoc{200: jsonOf[api.Project]()}},
		"DELETE /v1/projects/{project}":                             {summary: "Delete a project", query: []string{"force"}, ok: map[int]*bodyDoc{204: noBody}, errs: []int{409, 423}, lockBody: true},
		"POST /v1/projects/{project}/encrypt":                       {summary: "Encrypt a batch of a project's states", query: []string{"limit"}, ok: map[int]*bodyDoc{200: jsonOf[api.ProjectEncryption]()}, errs: []int{409, 423}, lockBody: true},
		"POST /v1/projects/{project}/credentials":                   {summary: "Create the login role of the pg backend", ok: map[int]*bodyDoc{200: jsonOf[api.ProjectCredentials]()}, errs: []int{409}},
		"GET /v1/state/{project}":                                   {summary: "List a project's workspaces", query: []string{"limit", "continue"}, ok: map[int]*bodyDoc{200: jsonOf[api.WorkspaceList]()}},
		"GET /v1/state/{project}/{workspace}":                       {summary: "Read a workspace's state (Terraform's http backend)", ok: map[int]*bodyDoc{200: stateDoc}, errs: []int{422}},
		"POST /v1/state/{project}/{workspace}":                      {summary: "Write a workspace's state (Terraform's http backend)", query: []string{"ID"}, headers: []string{"Content-MD5"}, body: stateDoc, ok: map[int]*bodyDoc{200: jsonOf[stateResult]()}, errs: append([]int{423}, writeErrors...), lockBody: true},
		"PUT /v1/state/{project}/{workspace}":                       {summary: "Write a workspace's state", query: []string{"ID"}, headers: []string{"Content-MD5"}, body: stateDoc, ok: map[int]*bodyDoc{200: jsonOf[stateResult]()}, errs: append([]int{423}, writeErrors...), lockBody: true},
		"DELETE /v1/state/{project}/{workspace}":                    {summary: "Delete a workspace's state", query: []string{"ID"}, ok: map[int]*bodyDoc{200: noBody}, errs: []int{409, 423}, lockBody: true},
		"GET /v1/state/{project}/{workspace}/lock":                  {summary: "Who holds a workspace's lock", ok: map[int]*bodyDoc{200: jsonOf[api.LockStatus]()}},
		"POST /v1/state/{project}/{workspace}/lock":                 {summary: "Lock a workspace (also the LOCK method on the workspace, x-strata-methods)", body: lockInfo, ok: map[int]*bodyDoc{200: lockInfo}, errs: append([]int{423}, writeErrors...), lockBody: true},
		"DELETE /v1/state/{project}/{workspace}/lock":               {summary: "Unlock a workspace (also the UNLOCK method on the workspace, x-strata-methods); an empty body force-unlocks", query: []string{"force"}, body: jsonSchema(map[string]any{"type": "object", "properties": map[string]any{"ID": map[string]any{"type": "string"}}}), ok: map[int]*bodyDoc{200: noBody}, errs: append([]int{423}, writeErrors...), lockBody: true},
		"GET /v1/state/{project}/{workspace}/versions":              {summary: "List a workspace's state versions", ok: map[int]*bodyDoc{200: itemsOf[api.StateVersion]()}},
		"GET /v1/state/{project}/{workspace}/versions/{n}":          {summary: "Read one state version", ok: map[int]*bodyDoc{200: stateDoc}},
		"POST /v1/state/{project}/{workspace}/versions/{n}/restore": {summary: "Make a version the current state", ok: map[int]*bodyDoc{200: jsonOf[stateResult]()}, errs: []int{409, 423}, lockBody: true},

		"GET /v1/orgs/{org}/groups/{group}/members":           {summary: "List a group's members (static and selected)", query: []string{"limit", "continue"}, ok: map[int]*bodyDoc{200: jsonOf[api.MemberList]()}},
		"PUT /v1/orgs/{org}/groups/{group}/members/{node}":    {summary: "Add a node to a group statically", ok: map[int]*bodyDoc{201: noBody, 204: noBody}, errs: []int{409, 422}},
		"DELETE /v1/orgs/{org}/groups/{group}/members/{node}": {summary: "Remove a static member", ok: map[int]*bodyDoc{204: noBody}, errs: []int{409}},
		"POST /v1/nodes:apply": {summary: "Create or update many nodes: one JSON node per line",
			body: ndjsonOf[applyLine]("one node object per line, with its static groups"),
			ok: map[int]*bodyDoc{200: {ct: "application/x-ndjson", desc: "one ApplyResult per line, then {\"summary\": ApplySummary}", schema: map[string]any{"anyOf": []any{
				map[string]any{"$ref": "#/components/schemas/ApplyResult"},
				map[string]any{"type": "object", "additionalProperties": false, "required": []any{"summary"}, "properties": map[string]any{"summary": map[string]any{"$ref": "#/components/schemas/ApplySummary"}}},
			}}}}, errs: []int{413}},

		"GET /v1/nodes/{node}/pillar": {summary: "A node's merged pillar", query: []string{"explain"}, headers: []string{"If-None-Match", "Cache-Control"},
			ok: map[int]*bodyDoc{200: jsonSchema(anyObject), 304: noBody}},
		"GET /v1/salt/pillar/{minion}": {summary: "A minion's pillar for Salt's http_json ext_pillar (errors are {\"_errors\": […]} with 200, as Salt needs)", ok: map[int]*bodyDoc{200: jsonSchema(anyObject)}},
		"POST /v1/salt/credentials":    {summary: "Create the login role of Salt's postgres ext_pillar", ok: map[int]*bodyDoc{200: jsonOf[api.SaltCredentials]()}, errs: []int{409}},
		"POST /v1/pillars:import": {summary: "Import a Salt pillar tree (or, with format=ndjson, a sync stream)", query: []string{"org", "dryRun", "skipUnsupported", "format", "file"},
			body: (&bodyDoc{ct: "application/json", typ: reflect.TypeFor[api.PillarImportRequest]()}).withAlso(ndjsonLines(anyObject)),
			ok:   map[int]*bodyDoc{200: (&bodyDoc{ct: "application/json", schema: map[string]any{"anyOf": []any{map[string]any{"$ref": "#/components/schemas/ImportReport"}, map[string]any{"$ref": "#/components/schemas/SyncReport"}}}, desc: "a streamed import answers application/x-ndjson progress lines"}).withAlso(ndjsonLines(anyObject))},
			errs: writeErrors},
		"GET /v1/pillars:export": {summary: "Export the pillar rows as a Salt pillar tree (or, with format=ndjson, a sync stream)", query: []string{"org", "format"},
			ok: map[int]*bodyDoc{200: (&bodyDoc{ct: "application/json", typ: reflect.TypeFor[api.PillarExport](), desc: "with format=ndjson: application/x-ndjson records"}).withAlso(ndjsonLines(anyObject))}},
		"GET /v1/pillar-settings":                 {summary: "The pillar settings every replica shares", ok: map[int]*bodyDoc{200: jsonOf[api.PillarSettings]()}},
		"PUT /v1/pillar-settings":                 {summary: "Change the pillar settings", body: jsonOf[api.PillarSettings](), ok: map[int]*bodyDoc{200: jsonOf[api.PillarSettings]()}, errs: writeErrors},
		"GET /v1/pillar-categories":               {summary: "List the categories with properties or rows", ok: map[int]*bodyDoc{200: itemsOf[api.PillarCategory]()}},
		"GET /v1/pillar-categories/{category}":    {summary: "Read a category's properties", ok: map[int]*bodyDoc{200: jsonOf[api.PillarCategory]()}},
		"PUT /v1/pillar-categories/{category}":    {summary: "Set a category's properties (a kind binding, secret)", headers: []string{"If-Match"}, body: jsonOf[api.PillarCategoryRequest](), ok: map[int]*bodyDoc{200: jsonOf[api.PillarCategory](), 201: jsonOf[api.PillarCategory]()}, errs: writeErrors},
		"DELETE /v1/pillar-categories/{category}": {summary: "Remove a category's properties (its rows stay)", headers: []string{"If-Match"}, ok: map[int]*bodyDoc{204: noBody}, errs: []int{409, 412}},

		"GET /v1/kinds":                      {summary: "List the kinds (built-in and user-defined)", ok: map[int]*bodyDoc{200: itemsOf[api.KindInfo]()}},
		"PUT /v1/kinds/{kind}":               {summary: "Register a kind or a new revision of its schema", query: []string{"dryRun"}, body: jsonOf[api.KindRequest](), ok: map[int]*bodyDoc{200: jsonOf[api.KindResult](), 201: jsonOf[api.KindResult]()}, errs: writeErrors},
		"GET /v1/kinds/{kind}":               {summary: "Read a kind and its current schema (the spec schema of its objects)", ok: map[int]*bodyDoc{200: jsonOf[api.KindInfo]()}},
		"GET /v1/kinds/{kind}/revisions":     {summary: "List a kind's schema revisions", ok: map[int]*bodyDoc{200: itemsOf[api.KindRevision]()}},
		"GET /v1/kinds/{kind}/revisions/{n}": {summary: "Read one schema revision", ok: map[int]*bodyDoc{200: jsonOf[api.KindRevision]()}},
	}
	for _, pt := range pillarTargets {
		d["GET "+pt.prefix] = opDoc{summary: "List a target's pillar categories", ok: map[int]*bodyDoc{200: itemsOf[pillarListItem]()}}
		d["GET "+pt.prefix+"/{category}"] = opDoc{summary: "Read a pillar row", ok: map[int]*bodyDoc{200: jsonOf[pillar.Pillar]()}}
		d["PUT "+pt.prefix+"/{category}"] = opDoc{summary: "Write a pillar row: the body is the category's data, a JSON object or an SLS file (application/yaml)", query: []string{"file"}, headers: []string{"If-Match"},
			body: jsonSchema(anyObject).withAlso(&bodyDoc{ct: "application/yaml", schema: map[string]any{"type": "string"}}),
			ok:   map[int]*bodyDoc{200: jsonOf[pillar.Pillar](), 201: jsonOf[pillar.Pillar]()}, errs: writeErrors}
		d["DELETE "+pt.prefix+"/{category}"] = opDoc{summary: "Delete a pillar row", headers: []string{"If-Match"}, ok: map[int]*bodyDoc{204: noBody}, errs: []int{409, 412}}
		d["GET "+pt.prefix+"/{category}/history"] = opDoc{summary: "A pillar row's history, newest first", query: []string{"before", "limit"}, ok: map[int]*bodyDoc{200: itemsOf[api.PillarChange]()}}
		d["POST "+pt.prefix+"/{category}/history/{change}/restore"] = opDoc{summary: "Restore a pillar row to an entry of its history", headers: []string{"If-Match"}, ok: map[int]*bodyDoc{200: jsonOf[pillar.Pillar]()}, errs: []int{409, 412, 422}}
	}
	return d
}

// kindDocs describes the object routes of kind k (kindRoutes, or userKindRoutes when user)
// from its descriptor: the list, watch, create, read, replace, merge-patch, delete and rename
// of one generic path.
func (a *API) kindDocs(k *resource.Kind, rs []route, user bool, g *schemaGen) map[string]opDoc {
	name := k.Name
	obj, objIn := "Object", "ObjectInput"
	if !user {
		obj, objIn = g.kindSchemas(k)
	}
	ref := func(n string) *bodyDoc {
		return jsonSchema(map[string]any{"$ref": "#/components/schemas/" + n})
	}
	listQuery := []string{"limit", "continue", "labelSelector", "watch", "resourceVersion"}
	if k.OrgMember != "" || user {
		listQuery = append(listQuery, "org")
	}
	what := name + " objects"
	if user {
		what = "objects of a user-defined kind (its spec schema: GET /v1/kinds/{kind})"
	}
	itemParam := "/{" + k.Param + "}"
	if user {
		itemParam = "/{name}"
	}
	d := map[string]opDoc{}
	for _, rt := range rs {
		method, path, _ := strings.Cut(rt.pattern, " ")
		item := strings.HasSuffix(path, itemParam)
		switch {
		case strings.HasSuffix(path, "/rename"):
			d[rt.pattern] = opDoc{summary: "Rename one of the " + what + " in place", body: jsonOf[struct {
				Name string `json:"name"`
			}](), ok: map[int]*bodyDoc{200: ref(obj)}, errs: writeErrors}
		case method == "GET" && !item:
			d[rt.pattern] = opDoc{summary: "List (or watch=true: watch) " + what, query: listQuery,
				ok:   map[int]*bodyDoc{200: (&bodyDoc{ct: "application/json", schema: map[string]any{"$ref": "#/components/schemas/" + g.listSchema(obj)}, desc: "with watch=true: application/x-ndjson, one WatchEvent per line"}).withAlso(watchLines)},
				errs: []int{410, 504}}
		case method == "POST":
			d[rt.pattern] = opDoc{summary: "Create one of the " + what, body: ref(objIn), ok: map[int]*bodyDoc{201: ref(obj)}, errs: writeErrors}
		case method == "GET":
			d[rt.pattern] = opDoc{summary: "Read one of the " + what, ok: map[int]*bodyDoc{200: ref(obj)}}
		case method == "PUT":
			d[rt.pattern] = opDoc{summary: "Replace one of the " + what + " (or create it, without a resourceVersion)", body: ref(objIn), ok: map[int]*bodyDoc{200: ref(obj), 201: ref(obj)}, errs: writeErrors}
		case method == "PATCH":
			d[rt.pattern] = opDoc{summary: "Change one of the " + what + " by a JSON merge patch (RFC 7396)", body: &bodyDoc{ct: "application/merge-patch+json", schema: mergePatch}, ok: map[int]*bodyDoc{200: ref(obj)}, errs: writeErrors}
		case method == "DELETE":
			d[rt.pattern] = opDoc{summary: "Delete one of the " + what, query: []string{"resourceVersion", "cascade"}, ok: map[int]*bodyDoc{204: nil}, errs: []int{409}}
		}
	}
	return d
}

// kindSchemas registers the components of a built-in kind's objects: Object with the kind's
// own spec schema (the one strata ships, kind.BuiltinSchema), for answers and for requests.
func (g *schemaGen) kindSchemas(k *resource.Kind) (out, in string) {
	if _, ok := g.defs[k.Name]; ok {
		return k.Name, k.Name + "Input"
	}
	spec := map[string]any{"type": "object"}
	if b, err := kind.BuiltinSchema(k.Name); err == nil {
		spec = map[string]any{}
		if err := json.Unmarshal(b, &spec); err != nil {
			panic(fmt.Sprintf("openapi: built-in schema of %s: %v", k.Name, err))
		}
	}
	g.ref(reflect.TypeFor[api.Object]())
	g.inputs().ref(reflect.TypeFor[api.Object]())
	for _, n := range []string{k.Name, k.Name + "Input"} {
		if _, taken := g.owner[n]; taken {
			panic(fmt.Sprintf("openapi: kind %s's component collides with a wire type", k.Name))
		}
	}
	g.defs[k.Name] = map[string]any{
		"description": "A " + k.Name + " object.",
		"allOf": []any{map[string]any{"$ref": "#/components/schemas/Object"},
			map[string]any{"properties": map[string]any{"kind": map[string]any{"const": k.Name}, "spec": spec}}},
	}
	g.defs[k.Name+"Input"] = map[string]any{
		"description": "A " + k.Name + " object as written: what the server fills in may be left out.",
		"allOf": []any{map[string]any{"$ref": "#/components/schemas/ObjectInput"},
			map[string]any{"properties": map[string]any{"spec": spec}}},
	}
	return k.Name, k.Name + "Input"
}

// listSchema registers the page of a list of obj.
func (g *schemaGen) listSchema(obj string) string {
	name := obj + "List"
	if obj == "Object" {
		g.ref(reflect.TypeFor[api.ObjectList]())
		return "ObjectList"
	}
	if _, ok := g.defs[name]; !ok {
		g.defs[name] = map[string]any{
			"type":                 "object",
			"additionalProperties": false,
			"required":             []any{"items", "resourceVersion"},
			"properties": map[string]any{
				"items":           map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/" + obj}},
				"resourceVersion": map[string]any{"type": "string"},
				"continue":        map[string]any{"type": "string"},
			},
		}
	}
	return name
}

// opsDocs are the operations routes outside /v1 and the document itself: no token.
func opsDocs() map[string]opDoc {
	return map[string]opDoc{
		"GET /healthz": {summary: "The process runs", ok: map[int]*bodyDoc{200: jsonSchema(map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"const": "ok"}}})}},
		"GET /readyz": {summary: "The replica can serve (writes=true: and write)", query: []string{"writes"},
			ok: map[int]*bodyDoc{200: jsonSchema(map[string]any{"type": "object", "required": []any{"status"}, "properties": map[string]any{"status": map[string]any{"type": "string"}, "writes": map[string]any{"type": "string"}, "warnings": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}})}},
		"GET /metrics":       {summary: "Prometheus metrics", ok: map[int]*bodyDoc{200: {ct: "text/plain", schema: map[string]any{"type": "string"}}}},
		"GET /version":       {summary: "The server's version", ok: map[int]*bodyDoc{200: jsonSchema(map[string]any{"type": "object", "required": []any{"version"}, "properties": map[string]any{"version": map[string]any{"type": "string"}}})}},
		"GET " + OpenAPIPath: {summary: "This document (OpenAPI 3.1); no token needed", ok: map[int]*bodyDoc{200: jsonSchema(map[string]any{"type": "object", "required": []any{"openapi"}})}},
	}
}

var pathParamRE = regexp.MustCompile(`\{([^}]+)\}`)

// OpenAPIDocument builds the document of the routes this API serves.
func (a *API) OpenAPIDocument() (map[string]any, error) {
	g := newSchemaGen()
	docs := opDocs()
	var kindRoutes []route
	if a.resources != nil {
		for _, k := range a.resources.Kinds().All() {
			rs := a.kindRoutes(k)
			kindRoutes = append(kindRoutes, rs...)
			for p, d := range a.kindDocs(k, rs, false, g) {
				docs[p] = d
			}
		}
		rs := a.userKindRoutes()
		kindRoutes = append(kindRoutes, rs...)
		for p, d := range a.kindDocs(&resource.Kind{Name: "{kind}"}, rs, true, g) {
			docs[p] = d
		}
	}
	g.ref(reflect.TypeFor[api.Problem]())
	g.ref(reflect.TypeFor[pillar.ImportReport]())
	g.ref(reflect.TypeFor[pillar.SyncReport]())
	g.ref(reflect.TypeFor[watchEvent]())
	g.ref(reflect.TypeFor[api.ApplyResult]())
	g.ref(reflect.TypeFor[api.ApplySummary]())

	paths := map[string]map[string]any{}
	ids := map[string]string{}
	add := func(pattern string, d opDoc, authed bool, rt *route) error {
		method, path, _ := strings.Cut(pattern, " ")
		op, err := g.operation(method, path, d, authed, rt)
		if err != nil {
			return fmt.Errorf("%s: %w", pattern, err)
		}
		id := op["operationId"].(string)
		if prev, dup := ids[id]; dup {
			return fmt.Errorf("%s: operationId %s is also %s's", pattern, id, prev)
		}
		ids[id] = pattern
		item := paths[path]
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		item[strings.ToLower(method)] = op
		return nil
	}
	for pattern, d := range opsDocs() {
		if err := add(pattern, d, false, nil); err != nil {
			return nil, err
		}
	}
	extra := map[string][]string{} // path of a twin → x-strata-methods
	for _, rt := range a.table() {
		rt := rt
		method, path, _ := strings.Cut(rt.pattern, " ")
		if method == "LOCK" || method == "UNLOCK" {
			// Terraform's methods are not OpenAPI's: described beside their twins.
			twin := map[string]string{"LOCK": "POST", "UNLOCK": "DELETE"}[method] + " " + path + "/lock"
			if _, ok := docs[twin]; !ok {
				return nil, fmt.Errorf("%s: no twin %s", rt.pattern, twin)
			}
			extra[path+"/lock"] = append(extra[path+"/lock"], method)
			continue
		}
		d, ok := docs[rt.pattern]
		if !ok {
			return nil, fmt.Errorf("route %s has no description for the OpenAPI document (openapi.go, opDocs)", rt.pattern)
		}
		if err := add(rt.pattern, d, true, &rt); err != nil {
			return nil, err
		}
	}
	for twinPath, methods := range extra {
		sort.Strings(methods)
		x := map[string]any{}
		for _, m := range methods {
			twin := map[string]string{"LOCK": "post", "UNLOCK": "delete"}[m]
			x[m] = map[string]any{
				"path":        strings.TrimSuffix(twinPath, "/lock"),
				"sameAs":      twin,
				"description": fmt.Sprintf("%s %s is %s %s: the same parameters, body and answers (Terraform's http backend sends %s).", m, strings.TrimSuffix(twinPath, "/lock"), strings.ToUpper(twin), twinPath, m),
			}
		}
		paths[twinPath]["x-strata-methods"] = x
	}

	// A problem may carry extension members (RFC 9457), e.g. a refused kind's report.
	g.defs["Problem"].(map[string]any)["additionalProperties"] = true
	responses := map[string]any{}
	for status := range problemStatuses {
		r := map[string]any{
			"description": http.StatusText(status) + " (an RFC 9457 problem; see docs/api.md, Errors)",
			"content":     map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}},
		}
		switch status {
		case http.StatusServiceUnavailable:
			r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "Seconds to wait before trying again (the problem's reason says why).", "schema": map[string]any{"type": "string"}}}
		case http.StatusUnauthorized:
			r["headers"] = map[string]any{"WWW-Authenticate": map[string]any{"description": "The schemes the route takes: Bearer, and Basic under /v1/state/… and /v1/salt/….", "schema": map[string]any{"type": "string"}}}
		}
		responses[fmt.Sprint(status)] = r
	}
	responses["423LockInfo"] = map[string]any{
		"description": "Locked: the workspace's lock is held by another; the body is the holder's LockInfo, as Terraform's http backend expects",
		"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/LockInfo"}}},
	}
	g.ref(reflect.TypeFor[api.LockInfo]())
	pathsOut := map[string]any{}
	for p, item := range paths {
		pathsOut[p] = item
	}
	return map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": map[string]any{
			"title":       "strata",
			"version":     a.version,
			"description": "strata's HTTP API, derived from the server's route table and its kinds' descriptors. Every /v1 route needs a token except this document's. User-defined kinds are described generically: a kind's schema is at GET /v1/kinds/{kind}. Terraform's LOCK and UNLOCK methods are listed as x-strata-methods beside their POST and DELETE …/lock twins. See docs/api.md.",
			"license":     map[string]any{"name": "see the strata repository"},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths":    pathsOut,
		"components": map[string]any{
			"schemas":   g.defs,
			"responses": responses,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "An API token (strata_…) as Authorization: Bearer <token>."},
				"basic":  map[string]any{"type": "http", "scheme": "basic", "description": "The token as the password (the user name is ignored); offered under /v1/state/… and /v1/salt/…, for Terraform's http backend and Salt."},
			},
		},
	}, nil
}

// problemStatuses are the statuses a problem document may have (the fault kinds' table).
var problemStatuses = func() map[int]bool {
	m := map[int]bool{}
	for _, k := range kinds {
		m[k.status] = true
	}
	return m
}()

// operation builds one operation object.
func (g *schemaGen) operation(method, path string, d opDoc, authed bool, rt *route) (map[string]any, error) {
	op := map[string]any{"operationId": operationID(method, path), "summary": d.summary}
	if d.summary == "" {
		return nil, fmt.Errorf("no summary")
	}
	var params []any
	for _, m := range pathParamRE.FindAllStringSubmatch(path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range d.query {
		qd, ok := queryDocs[q]
		if !ok {
			return nil, fmt.Errorf("query parameter %s has no description (queryDocs)", q)
		}
		params = append(params, map[string]any{"name": q, "in": "query", "description": qd["description"], "schema": qd["schema"]})
	}
	for _, h := range d.headers {
		hd, ok := headerDocs[h]
		if !ok {
			return nil, fmt.Errorf("header %s has no description (headerDocs)", h)
		}
		params = append(params, map[string]any{"name": h, "in": "header", "description": hd["description"], "schema": hd["schema"]})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if d.body != nil {
		op["requestBody"] = map[string]any{"content": g.inputs().content(d.body)}
	}
	responses := map[string]any{}
	for status, b := range d.ok {
		r := map[string]any{"description": http.StatusText(status)}
		if b != nil {
			r["content"] = g.content(b)
			if b.desc != "" {
				r["description"] = http.StatusText(status) + "; " + b.desc
			}
		}
		responses[fmt.Sprint(status)] = r
	}
	if len(d.ok) == 0 {
		return nil, fmt.Errorf("no success status")
	}
	if authed {
		errs := append(append([]int{}, commonErrors...), d.errs...)
		for _, s := range errs {
			ref := "#/components/responses/" + fmt.Sprint(s)
			if s == http.StatusLocked && d.lockBody {
				ref = "#/components/responses/423LockInfo"
			}
			responses[fmt.Sprint(s)] = map[string]any{"$ref": ref}
		}
		if rt != nil && (rt.salt || strings.HasPrefix(path, "/v1/state/")) {
			op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"basic": []any{}}}
		}
		if rt != nil {
			op["x-strata-scope"] = map[string]any{"family": rt.family, "verb": rt.verb}
			// Generators group operations by tag: the scope family is strata's own grouping.
			op["tags"] = []any{rt.family}
		}
	} else {
		op["tags"] = []any{"operations"}
		op["security"] = []any{}
		if method == "GET" && path == "/readyz" {
			responses["503"] = map[string]any{"$ref": "#/components/responses/503"}
		}
		if len(d.query) > 0 {
			responses["400"] = map[string]any{"$ref": "#/components/responses/400"}
		}
	}
	op["responses"] = responses
	return op, nil
}

// content is the content map of one body.
func (g *schemaGen) content(b *bodyDoc) map[string]any {
	out := map[string]any{}
	for _, x := range append([]*bodyDoc{b}, b.also...) {
		s := x.schema
		if x.typ != nil {
			s = g.ref(x.typ)
		}
		out[x.ct] = map[string]any{"schema": s}
	}
	return out
}

// operationID names an operation after its method and path: GET /v1/orgs/{org}/groups is
// getOrgsByOrgGroups.
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/v1"), "/") {
		if seg == "" {
			continue
		}
		if m := pathParamRE.FindStringSubmatch(seg); m != nil {
			b.WriteString("By")
			seg = m[1]
		}
		up := true
		for _, r := range seg {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				up = true
				continue
			}
			if up {
				r = unicode.ToUpper(r)
				up = false
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// OpenAPIJSON is the OpenAPI document of release version as GET /v1/openapi.json serves
// it, without a server or a database (`strata openapi`): the document depends only on the
// release (the route table and the built-in kinds), so the two are byte for byte the same.
func OpenAPIJSON(version string) ([]byte, error) {
	a := New(Options{Resources: resource.NewService(nil), Pillars: pillar.NewService(nil), Version: version,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	b, err := a.openAPIDocumentJSON()
	// The served answer ends in a newline (writeRawJSON), and so does the printed document.
	return append(b, '\n'), err
}

func (a *API) openAPIDocumentJSON() ([]byte, error) {
	a.openAPIOnce.Do(func() {
		doc, err := a.OpenAPIDocument()
		if err == nil {
			a.openAPIBody, err = json.MarshalIndent(doc, "", "  ")
		}
		a.openAPIErr = err
	})
	return a.openAPIBody, a.openAPIErr
}

// openAPIJSON serves the document (GET /v1/openapi.json, no token): built once, it depends
// only on the release.
func (a *API) openAPIJSON(w http.ResponseWriter, _ *http.Request) error {
	b, err := a.openAPIDocumentJSON()
	if err != nil {
		return err
	}
	return writeRawJSON(w, http.StatusOK, b)
}
