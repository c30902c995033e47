package client

import (
	"context"
	"net/http"
	"net/url"
)

// StateDelete removes a workspace's state (terraform's http backend DELETE); its versions
// are kept, so a version can be restored later. lockID is required while the workspace is
// locked; otherwise the answer is a 423 *Error whose Body is the holder's LockInfo (see
// LockHolder).
func (c *Client) StateDelete(ctx context.Context, project, workspace, lockID string) error {
	q := url.Values{}
	if lockID != "" {
		q.Set("ID", lockID)
	}
	_, err := c.Do(ctx, Request{Method: http.MethodDelete, Path: statePath(project, workspace), Query: q}, nil)
	return err
}
