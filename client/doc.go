// Package client is strata's Go client: everything the strata CLI does (it uses this
// package for every command but serve and migrate), a Go program can do the same way.
//
// # Quick start
//
// Connect with the server's URL and a token (strata token create, or the admin token):
//
//	c, err := client.New("https://strata.example.com", os.Getenv("STRATA_TOKEN"), nil)
//
// Objects — orgs, nodes, groups and the objects of your own kinds — are read and written
// through a Resources: c.Orgs(), c.Nodes(), c.Groups(org), or c.Objects(kind, org) for a
// user-defined kind. Every object is an Object: Kind, Metadata (name, labels, annotations,
// resourceVersion) and a JSON Spec.
//
//	_, err = c.Nodes().Create(ctx, client.Object{
//		Metadata: client.ObjectMeta{Name: "web01", Labels: map[string]string{"env": "prod"}},
//		Spec:     json.RawMessage(`{"org":"acme"}`),
//	})
//	page, err := c.Nodes().List(ctx, client.ListOptions{LabelSelector: "env=prod", Limit: 100})
//
// A list answers a page: pass its Continue back in ListOptions.Continue for the next one
// (ListAll follows them for you). Writes are optimistic: Replace with the resourceVersion
// you read, and a concurrent change is a conflict (IsConflict), never an overwrite.
//
// Pillars are set per target (PillarTarget: global, an org, a group, a node) and category
// with PillarSet; PillarRender answers a node's merged pillar, what Salt gets. Terraform and
// OpenTofu state lives in projects: StateLock, StatePush, StatePull and StateUnlock speak the
// http backend's protocol.
//
// # Watching
//
// Resources.Watch streams the changes after a list's ResourceVersion: ADDED, MODIFIED and
// DELETED events, and BOOKMARKs that only advance the version. Keep the last event's
// Object.Metadata.ResourceVersion; when the stream ends (a dropped connection, io.EOF, or a
// 503 from a replica that shuts down), watch again from it and nothing is missed. A 410
// (IsGone) means the version is older than the server's history: list again.
//
// # Errors and retries
//
// A refusal is an *Error with the HTTP status and the server's RFC 9457 problem document
// (Problem.Type, Detail, and Errors naming each refused field by JSON pointer); IsNotFound,
// IsConflict, IsForbidden, IsUnauthorized, IsLocked and IsGone tell them apart, and LockOf
// reads the holder of a workspace's lock from a 423. A 503 with a Retry-After is retried
// (Client.Retries, Client.MaxRetryWait) when the request cannot have been half done.
//
// The runnable examples below run against a real server in this package's tests. The HTTP
// API itself is described by docs/api.md and, as OpenAPI 3.1, by GET /v1/openapi.json.
//
// # Wire types
//
// The request and response types (Object, Pillar, Project, LockInfo, Problem, …) are
// defined in package github.com/stratahq/strata/api, which the server uses too and which
// imports nothing else of strata; this package re-exports each of them under the same name
// as a type alias, so client.Object and api.Object are one type.
package client
