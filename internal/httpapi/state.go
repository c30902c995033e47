package httpapi

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
	"github.com/stratahq/strata/internal/tfstate"
)

// This file serves Terraform/OpenTofu state: projects, and the http backend protocol on
// /v1/state/{project}/{workspace}. The protocol is Terraform's, so some answers are not
// problem documents: a conflicting LOCK answers 423 with the holder's LockInfo JSON (the
// body Terraform and OpenTofu parse to print the holder), and reads carry Content-MD5.

func actorOf(r *http.Request, p *auth.Principal, project string) tfstate.Actor {
	return tfstate.Actor{Name: p.Actor(), RemoteAddr: remoteAddr(r), CanForceUnlock: p.Allows("state", "force-unlock", project)}
}

// readBody reads a raw request body (state, LockInfo), keeping the 413 for oversized ones.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return nil, err
		}
		return nil, fault.Invalid("", "reading the request body: %v", err)
	}
	return b, nil
}

// Projects.

// projectList lists the projects the token may read, with ?limit= and ?continue=. The
// scope filter is part of the query, so pages hold visible projects only.
func (a *API) projectList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := a.page(r, "projects", maxProjectList, maxProjectList)
	if err != nil {
		return err
	}
	var after string
	if err := pg.open(&after); err != nil {
		return err
	}
	ps, more, err := a.state.ProjectList(r.Context(), tfstate.ProjectListOptions{
		Filter: p.ListFilter("projects", "read"), After: after, Limit: pg.limit})
	if err != nil {
		return err
	}
	out := api.ProjectList{Items: ps}
	if more {
		if out.Continue, err = pg.next(true, ps[len(ps)-1].Name); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// maxProjectList is the largest (and default) page of GET /v1/projects.
const maxProjectList = 1000

// projectPut creates a project. The body is optional: {"encryption": true} creates it
// encrypted.
func (a *API) projectPut(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("project")
	b, err := readBody(r)
	if err != nil {
		return err
	}
	var body struct {
		Encryption bool `json:"encryption"`
	}
	if len(bytes.TrimSpace(b)) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(b))
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
	}
	pr, created, err := a.state.ProjectCreate(r.Context(), actorOf(r, p, name), name, tfstate.ProjectOptions{Encryption: body.Encryption})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, pr)
}

// projectEncrypt converts a batch (?limit=, default tfstate.DefaultEncryptBatch) of a
// project's plain states and versions to encrypted ones; the client calls it until done.
// Batches keep each transaction short and let the CLI show progress; the first one marks the
// project encrypted, so the conversion is safe to interrupt and resume.
func (a *API) projectEncrypt(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("project")
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			return fault.Invalid("limit", "limit must be an integer from 1 to 10000, not %q", truncateParam(s))
		}
		limit = n
	}
	out, err := a.state.ProjectEncrypt(r.Context(), actorOf(r, p, name), name, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (a *API) projectGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("project")
	pr, err := a.state.ProjectGet(r.Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, pr)
}

func (a *API) projectDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("project")
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	if err := a.state.ProjectDelete(r.Context(), actorOf(r, p, name), name, force); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) projectCredentials(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	name := r.PathValue("project")
	creds, err := a.state.ProjectCredentials(r.Context(), actorOf(r, p, name), name)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, creds)
}

func boolParam(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, fault.Invalid(name, "%s must be true or false, not %q", name, truncateParam(s))
	}
	return v, nil
}

// State (Terraform's http backend).

func stateRef(r *http.Request) (project, workspace string) {
	return r.PathValue("project"), r.PathValue("workspace")
}

// stateGet serves the http backend's GET (and HEAD). A token with state:read gets the state
// as stored; one with only state:read-outputs gets the outputs-only document (root outputs,
// no resources; see tfstate.OutputsOnly), whose own MD5 is the Content-MD5, so Terraform's
// check of that header passes on the bytes it receives.
func (a *API) stateGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	get := a.state.StateGet
	if !p.Allows("state", "read", project) {
		if !p.Allows("state", "read-outputs", project) {
			return p.Check("state", "read", project)
		}
		get = a.state.StateGetOutputs
	}
	st, err := get(r.Context(), project, workspace)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(st.MD5[:]))
	w.Header().Set("Content-Length", strconv.Itoa(len(st.Data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(st.Data)
	}
	return nil
}

// contentMD5 decodes a Content-MD5 header: base64 as RFC 1864 and Terraform send it, or
// hex as some scripts do.
func contentMD5(r *http.Request) ([]byte, error) {
	h := strings.TrimSpace(r.Header.Get("Content-MD5"))
	if h == "" {
		return nil, nil
	}
	if b, err := base64.StdEncoding.DecodeString(h); err == nil && len(b) == md5.Size {
		return b, nil
	}
	if b, err := hex.DecodeString(h); err == nil && len(b) == md5.Size {
		return b, nil
	}
	return nil, fault.Invalid("Content-MD5", "Content-MD5 must be the base64 (or hex) MD5 of the body")
}

func (a *API) stateWrite(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	sum, err := contentMD5(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	res, err := a.state.StateWrite(r.Context(), actorOf(r, p, project), project, workspace,
		tfstate.WriteRequest{LockID: r.URL.Query().Get("ID"), Body: body, ContentMD5: sum})
	if err != nil {
		return err
	}
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(res.MD5[:]))
	return writeJSON(w, http.StatusOK, map[string]any{"version": res.Version, "unchanged": res.Unchanged})
}

func (a *API) stateDelete(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	if err := a.state.StateDelete(r.Context(), actorOf(r, p, project), project, workspace, r.URL.Query().Get("ID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// stateLock serves LOCK (and GitLab-style POST …/lock): 200 with the stored LockInfo when
// the caller holds the lock (again, for a retry), 423 with the holder's LockInfo otherwise.
func (a *API) stateLock(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	body, err := readBody(r)
	if err != nil {
		return err
	}
	info, err := a.state.Lock(r.Context(), actorOf(r, p, project), project, workspace, body)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, info)
}

// stateUnlock serves UNLOCK (and DELETE …/lock): with Terraform's LockInfo or OpenTofu's
// {"ID": …} it releases that lock; an empty body is Terraform's force-unlock, which needs the
// state:force-unlock scope.
func (a *API) stateUnlock(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := tfstate.ParseUnlockBody(body)
	if err != nil {
		return err
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	if force {
		req.Force = true
	}
	if err := a.state.Unlock(r.Context(), actorOf(r, p, project), project, workspace, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (a *API) stateLockStatus(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	st, err := a.state.LockStatus(r.Context(), project, workspace)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (a *API) workspaceList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project := r.PathValue("project")
	// The token reads the whole project or nothing, so a page never holds what it may not
	// see; the continue token is sealed and bound to this project's list all the same.
	pg, err := a.page(r, "workspaces:"+project, maxWorkspaceList, maxWorkspaceList)
	if err != nil {
		return err
	}
	var after string
	if err := pg.open(&after); err != nil {
		return err
	}
	ws, more, err := a.state.WorkspaceList(r.Context(), project, tfstate.WorkspaceListOptions{After: after, Limit: pg.limit})
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []api.Workspace{}
	}
	out := api.WorkspaceList{Items: ws}
	if more {
		if out.Continue, err = pg.next(true, ws[len(ws)-1].Name); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// maxWorkspaceList is the largest (and default) page of GET /v1/state/{project}.
const maxWorkspaceList = 1000

func (a *API) versionList(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	vs, err := a.state.VersionList(r.Context(), project, workspace)
	if err != nil {
		return err
	}
	if vs == nil {
		vs = []api.StateVersion{}
	}
	return writeJSON(w, http.StatusOK, struct {
		Items []api.StateVersion `json:"items"`
	}{vs})
}

func versionNumber(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 1 {
		return 0, fault.Invalid("n", "version must be a positive integer, not %q", truncateParam(r.PathValue("n")))
	}
	return n, nil
}

// versionGet answers the version's state bytes, verbatim, with its metadata in headers
// (X-Strata-Version, X-Strata-Serial, X-Strata-Lineage) and Content-MD5.
func (a *API) versionGet(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	n, err := versionNumber(r)
	if err != nil {
		return err
	}
	v, data, err := a.state.VersionGet(r.Context(), project, workspace, n)
	if err != nil {
		return err
	}
	sum := md5.Sum(data)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	w.Header().Set("X-Strata-Version", strconv.FormatInt(v.N, 10))
	if v.Serial != nil {
		w.Header().Set("X-Strata-Serial", strconv.FormatInt(*v.Serial, 10))
	}
	if v.Lineage != "" {
		w.Header().Set("X-Strata-Lineage", v.Lineage)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return nil
}

func (a *API) versionRestore(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	project, workspace := stateRef(r)
	n, err := versionNumber(r)
	if err != nil {
		return err
	}
	res, err := a.state.VersionRestore(r.Context(), actorOf(r, p, project), project, workspace, n, r.URL.Query().Get("ID"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"version": res.Version, "unchanged": res.Unchanged})
}
