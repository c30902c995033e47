package sls

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// PlacementPrefix starts the comment line by which a file written by `strata pillar export`
// says which strata row it holds. Salt ignores it (a YAML comment); the reader places the
// row where it says instead of deriving target and category from top.sls, so an export
// imports back to the rows it came from — org rows, groups of an org, node names and
// categories that a Salt tree cannot spell (a category with a dot is a directory to Salt).
const PlacementPrefix = "# strata-export: "

// Placement is the row an exported SLS file holds, as JSON after PlacementPrefix.
type Placement struct {
	// Target is global, org/<org>, group/<org>/<group> or node/<node>.
	Target   string `json:"target"`
	Category string `json:"category"`
	// Org is a node's org (so an import creates it where it was).
	Org string `json:"org,omitempty"`
	// Selector is a selector group's label selector: the group is created with it, and
	// the nodegroup listing its members at export time adds no static members.
	Selector string `json:"selector,omitempty"`
	// Priority is a group's spec.priority.
	Priority int `json:"priority,omitempty"`
}

// readPlacement finds a placement comment among the comment lines that open src (after an
// optional #! renderer line). It reports a malformed one.
func readPlacement(src []byte) (*Placement, int, error) {
	for i, line := range bytes.SplitN(src, []byte("\n"), 4) {
		t := bytes.TrimRight(line, "\r")
		if !bytes.HasPrefix(t, []byte("#")) {
			break
		}
		if rest, ok := bytes.CutPrefix(t, []byte(PlacementPrefix)); ok {
			var p Placement
			dec := json.NewDecoder(bytes.NewReader(rest))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				return nil, i + 1, fmt.Errorf("the strata-export comment is not the JSON strata writes: %v", err)
			}
			return &p, i + 1, nil
		}
	}
	return nil, 0, nil
}

// place applies a file's placement to a row whose top.sls target is t: the target must be
// the one the placement names (a node's minion id, '*' for global, a nodegroup or list for
// an org or group), so that Salt and strata see the same tree. It returns the reason when
// they disagree.
func place(p *Placement, t Target) (Target, string, string) {
	if !categoryRE.MatchString(p.Category) || len(p.Category) > maxCategory {
		return t, "", fmt.Sprintf("the strata-export comment names category %s, which is not a strata category", quoteShort(p.Category))
	}
	parts := strings.Split(p.Target, "/")
	out := Target{Match: t.Match, Members: t.Members, Placed: true}
	switch {
	case p.Target == "global":
		if t.Kind != "global" {
			return t, "", fmt.Sprintf("the strata-export comment places the file globally, but top.sls lists it for %s", quoteShort(t.Match))
		}
		out.Kind = "global"
	case len(parts) == 2 && parts[0] == "node":
		if t.Kind != "node" || t.Name != parts[1] {
			return t, "", fmt.Sprintf("the strata-export comment places the file at node %s, but top.sls lists it for %s", quoteShort(parts[1]), quoteShort(t.Match))
		}
		out.Kind, out.Name, out.Org = "node", parts[1], p.Org
	case len(parts) == 2 && parts[0] == "org" && validGroup(parts[1]):
		if t.Kind != "group" {
			return t, "", fmt.Sprintf("the strata-export comment places the file at org %s, but top.sls lists it for %s, not a nodegroup or list", quoteShort(parts[1]), quoteShort(t.Match))
		}
		out.Kind, out.Name = "org", parts[1]
	case len(parts) == 3 && parts[0] == "group" && validGroup(parts[1]) && validGroup(parts[2]):
		if t.Kind != "group" {
			return t, "", fmt.Sprintf("the strata-export comment places the file at group %s, but top.sls lists it for %s, not a nodegroup or list", quoteShort(parts[1]+"/"+parts[2]), quoteShort(t.Match))
		}
		out.Kind, out.Org, out.Name, out.Selector, out.Priority = "group", parts[1], parts[2], p.Selector, p.Priority
	default:
		return t, "", fmt.Sprintf("the strata-export comment names target %s: not global, org/ORG, group/ORG/GROUP or node/NODE", quoteShort(p.Target))
	}
	return out, p.Category, ""
}
