package resource

import "context"

// Things the scope migration (auth.MigrateScopes) asks about.
const (
	// MatchOrgs are orgs.
	MatchOrgs = "org"
	// MatchNodes are nodes.
	MatchNodes = "node"
	// MatchGlobalObjects are objects of global user kinds.
	MatchGlobalObjects = "global"
)

// NamesMatch reports whether any thing of the given sort (MatchOrgs, MatchNodes,
// MatchGlobalObjects) is called name or, with prefix, has a name starting with it.
func (s *Service) NamesMatch(ctx context.Context, sort, name string, prefix bool) (bool, error) {
	kind := ""
	switch sort {
	case MatchOrgs:
		kind = KindOrg
	case MatchNodes:
		kind = KindNode
	}
	var ok bool
	err := s.db.QueryRow(ctx, q.Get("NamesMatch"), kind, name, prefix, KindOrg, KindNode).Scan(&ok)
	return ok, err
}
