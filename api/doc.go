// Package api holds strata's wire types: the request and response bodies of the HTTP API
// (objects, pillars, kinds, Terraform projects, tokens, audit records, problems) and the PGP
// block finder that the CLI and the server's pillar reader must apply byte for byte alike.
//
// It imports nothing of strata, so the server's capability packages and the public client
// both depend on it without depending on each other — as Kubernetes keeps k8s.io/api apart
// from client-go. Package client re-exports every name here as a type alias, so programs
// written against client.Object and friends keep compiling.
package api
