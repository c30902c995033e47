package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// PillarSetDocument stores body as the target's category: contentType is application/json
// (a JSON object) or application/yaml (an SLS file, read by the server as Salt reads it).
// file, when set, names the body in the server's problems (file:line:column); ifMatch, when
// set, is the ETag the caller read (412 when the row changed since).
func (c *Client) PillarSetDocument(ctx context.Context, t PillarTarget, category string, body []byte, contentType, file, ifMatch string) (Pillar, error) {
	base, err := targetBase(t)
	if err != nil {
		return Pillar{}, err
	}
	h := http.Header{}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	}
	var q url.Values
	if file != "" {
		q = url.Values{"file": {file}}
	}
	var out Pillar
	hdr, err := c.Do(ctx, Request{Method: http.MethodPut, Path: base + "/" + pathEscape(category), Query: q, RawBody: body, ContentType: contentType, Header: h}, &out)
	if hdr != nil {
		out.ETag = hdr.Get("ETag")
		out.Warnings = Warnings(hdr)
	}
	return out, err
}

// PillarRestore writes the value of history entry change (its id) back as a new revision;
// ifMatch, when set, is the ETag the caller read.
func (c *Client) PillarRestore(ctx context.Context, t PillarTarget, category string, change int64, ifMatch string) (Pillar, error) {
	base, err := targetBase(t)
	if err != nil {
		return Pillar{}, err
	}
	h := http.Header{}
	if ifMatch != "" {
		h.Set("If-Match", ifMatch)
	}
	var out Pillar
	hdr, err := c.Do(ctx, Request{Method: http.MethodPost, Path: base + "/" + pathEscape(category) + "/history/" + strconv.FormatInt(change, 10) + "/restore", Header: h}, &out)
	if hdr != nil {
		out.ETag = hdr.Get("ETag")
		out.Warnings = Warnings(hdr)
	}
	return out, err
}

// IsPreconditionFailed reports a 412: an If-Match that no longer matches.
func IsPreconditionFailed(err error) bool { return statusIs(err, http.StatusPreconditionFailed) }
