package client

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// ParsePillarTarget reads a target as the server names it (PillarTarget.String): global,
// org/ORG, group/ORG/GROUP or node/NODE. Names never hold "/", so the form is unambiguous.
func ParsePillarTarget(s string) (PillarTarget, error) {
	parts := strings.Split(s, "/")
	switch {
	case s == "global":
		return PillarTarget{Global: true}, nil
	case len(parts) == 2 && parts[0] == "org" && parts[1] != "":
		return PillarTarget{Org: parts[1]}, nil
	case len(parts) == 3 && parts[0] == "group" && parts[1] != "" && parts[2] != "":
		return PillarTarget{Org: parts[1], Group: parts[2]}, nil
	case len(parts) == 2 && parts[0] == "node" && parts[1] != "":
		return PillarTarget{Node: parts[1]}, nil
	}
	return PillarTarget{}, fmt.Errorf("target %q is not global, org/ORG, group/ORG/GROUP or node/NODE", s)
}

// PillarGetRow reads one category of a target with its secret flag.
func (c *Client) PillarGetRow(ctx context.Context, t PillarTarget, category string) (PillarRow, error) {
	base, err := targetBase(t)
	if err != nil {
		return PillarRow{}, err
	}
	var out PillarRow
	hdr, err := c.Do(ctx, Request{Method: http.MethodGet, Path: base + "/" + pathEscape(category)}, &out)
	if hdr != nil {
		out.ETag = hdr.Get("ETag")
	}
	return out, err
}
