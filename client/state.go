package client

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
)

// ProjectPut creates a project (or adopts an existing pg-backend schema of that name); it
// is idempotent.
func (c *Client) ProjectPut(ctx context.Context, name string) (Project, error) {
	var out Project
	_, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/v1/projects/" + pathEscape(name)}, &out)
	return out, err
}

// ProjectCreate creates a project with the given properties (p.Encryption: stored
// encrypted), or returns the existing one; an existing unencrypted project asked for with
// encryption is a conflict (convert it with ProjectEncrypt).
func (c *Client) ProjectCreate(ctx context.Context, name string, p Project) (Project, error) {
	var out Project
	body := map[string]any{"encryption": p.Encryption}
	_, err := c.Do(ctx, Request{Method: http.MethodPut, Path: "/v1/projects/" + pathEscape(name), Body: body}, &out)
	return out, err
}

// ProjectEncrypt converts up to limit of a project's plain states and versions to encrypted
// ones (0: the server's default batch) and reports how many remain; call it until Done. The
// first call marks the project encrypted, so every write from then on is sealed.
func (c *Client) ProjectEncrypt(ctx context.Context, name string, limit int) (ProjectEncryption, error) {
	var out ProjectEncryption
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/projects/" + pathEscape(name) + "/encrypt", Query: q}, &out)
	return out, err
}

// ProjectGet reads a project.
func (c *Client) ProjectGet(ctx context.Context, name string) (Project, error) {
	var out Project
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/projects/" + pathEscape(name)}, &out)
	return out, err
}

// ProjectList lists the projects the token may read, following continue tokens to the end.
func (c *Client) ProjectList(ctx context.Context) ([]Project, error) {
	items := []Project{}
	q := url.Values{}
	for {
		var page ProjectList
		if _, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/projects", Query: q}, &page); err != nil {
			return items, err
		}
		items = append(items, page.Items...)
		if page.Continue == "" {
			return items, nil
		}
		q = url.Values{"continue": {page.Continue}}
	}
}

// ProjectDelete drops a project; force is required while it still holds states.
func (c *Client) ProjectDelete(ctx context.Context, name string, force bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	_, err := c.Do(ctx, Request{Method: http.MethodDelete, Path: "/v1/projects/" + pathEscape(name), Query: q}, nil)
	return err
}

// ProjectCredentials creates (or re-keys) the database role for pg backend clients of a
// project and returns its conn_str.
func (c *Client) ProjectCredentials(ctx context.Context, name string) (ProjectCredentials, error) {
	var out ProjectCredentials
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: "/v1/projects/" + pathEscape(name) + "/credentials"}, &out)
	return out, err
}

func statePath(project, workspace string) string {
	return "/v1/state/" + pathEscape(project) + "/" + pathEscape(workspace)
}

// WorkspaceList lists all of a project's workspaces with their lock holders, following
// continue tokens page by page.
func (c *Client) WorkspaceList(ctx context.Context, project string) ([]Workspace, error) {
	var all []Workspace
	var q url.Values
	for {
		var page WorkspaceList
		if _, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/v1/state/" + pathEscape(project), Query: q}, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.Continue == "" {
			return all, nil
		}
		q = url.Values{"continue": {page.Continue}}
	}
}

// StatePull returns a workspace's state, verbatim, after checking its Content-MD5.
func (c *Client) StatePull(ctx context.Context, project, workspace string) ([]byte, error) {
	body, hdr, err := c.DoRaw(ctx, Request{Method: http.MethodGet, Path: statePath(project, workspace)})
	if err != nil {
		return nil, err
	}
	if want := hdr.Get("Content-MD5"); want != "" {
		sum := md5.Sum(body)
		if base64.StdEncoding.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("state of %s/%s: Content-MD5 mismatch (transfer damaged)", project, workspace)
		}
	}
	return body, nil
}

// StatePush writes a state; lockID is required while the workspace is locked.
func (c *Client) StatePush(ctx context.Context, project, workspace string, state []byte, lockID string) (WriteResult, error) {
	q := url.Values{}
	if lockID != "" {
		q.Set("ID", lockID)
	}
	sum := md5.Sum(state)
	var out WriteResult
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: statePath(project, workspace), Query: q, RawBody: state,
		ContentType: "application/json", Header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}}, &out)
	return out, err
}

// StateLock takes a workspace's lock. When someone else holds it the error is a 423 *Error
// whose Body is the holder's LockInfo (see LockHolder).
func (c *Client) StateLock(ctx context.Context, project, workspace string, info LockInfo) (LockInfo, error) {
	var out LockInfo
	_, err := c.Do(ctx, Request{Method: "LOCK", Path: statePath(project, workspace), Body: info}, &out)
	return out, err
}

// StateUnlock releases the lock with id; force (id empty) ends whatever holds the workspace
// — an HTTP lock, or a pg client's session — and needs the state:force-unlock scope.
func (c *Client) StateUnlock(ctx context.Context, project, workspace, id string, force bool) error {
	req := Request{Method: "UNLOCK", Path: statePath(project, workspace)}
	if force {
		req.Query = url.Values{"force": {"true"}}
	}
	if id != "" {
		req.Body = LockInfo{ID: id}
	}
	_, err := c.Do(ctx, req, nil)
	return err
}

// StateLockStatus says who holds a workspace's lock.
func (c *Client) StateLockStatus(ctx context.Context, project, workspace string) (LockStatus, error) {
	var out LockStatus
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: statePath(project, workspace) + "/lock"}, &out)
	return out, err
}

// StateVersions lists a workspace's recorded versions.
func (c *Client) StateVersions(ctx context.Context, project, workspace string) ([]StateVersion, error) {
	var out struct {
		Items []StateVersion `json:"items"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodGet, Path: statePath(project, workspace) + "/versions"}, &out)
	return out.Items, err
}

// StateVersion returns version n's state bytes.
func (c *Client) StateVersion(ctx context.Context, project, workspace string, n int64) ([]byte, error) {
	body, _, err := c.DoRaw(ctx, Request{Method: http.MethodGet, Path: fmt.Sprintf("%s/versions/%d", statePath(project, workspace), n)})
	return body, err
}

// StateRestore writes version n back as the current state (a new serial and version).
func (c *Client) StateRestore(ctx context.Context, project, workspace string, n int64, lockID string) (int64, error) {
	q := url.Values{}
	if lockID != "" {
		q.Set("ID", lockID)
	}
	var out struct {
		Version int64 `json:"version"`
	}
	_, err := c.Do(ctx, Request{Method: http.MethodPost, Path: fmt.Sprintf("%s/versions/%d/restore", statePath(project, workspace), n), Query: q}, &out)
	return out.Version, err
}

// LockHolder extracts the holder's LockInfo from a 423 error of StateLock (or of any call
// that met a lock; LockOf adds the workspace).
func LockHolder(err error) (LockInfo, bool) {
	l, ok := LockOf(err)
	return l.Holder, ok
}
