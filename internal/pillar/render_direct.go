package pillar

import (
	"fmt"
	"strings"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/db/migrations"
)

// renderDirect is the query of pillar_render_sealed, as the newest migration that defines the
// function writes it, with its parameter p_node as $1: a render sends it as a statement of its
// own when the pool keeps plans (db.KeepsPlans), which PostgreSQL then runs without the
// PL/pgSQL call around it — 12-20 % cheaper in pgbench (docs/benchmarks.md, "Cold renders on
// the quiet machine"). It is taken from the migration rather than written twice, so the two
// query modes always render from the same rows.
var renderDirect = mustRenderDirect()

func mustRenderDirect() *db.Query {
	text, err := renderDirectText()
	if err != nil {
		panic(err)
	}
	return &db.Query{Name: "PillarRenderDirect", Text: text}
}

func renderDirectText() (string, error) {
	ms, err := migrations.Embedded()
	if err != nil {
		return "", err
	}
	var fn string
	for _, m := range ms {
		if strings.Contains(m.SQL, "FUNCTION {{schema}}.pillar_render_sealed(p_node text)") {
			fn = m.SQL
		}
	}
	start := strings.Index(fn, "RETURN QUERY")
	end := strings.Index(fn, "END;\n$$;")
	if start < 0 || end < start {
		return "", fmt.Errorf("pillar: no migration defines pillar_render_sealed(p_node text) as RETURN QUERY … END")
	}
	body := strings.TrimSpace(fn[start+len("RETURN QUERY") : end])
	if strings.Count(body, ";") != 1 || !strings.HasSuffix(body, ";") {
		return "", fmt.Errorf("pillar: pillar_render_sealed's body is not one query")
	}
	return strings.ReplaceAll(body, "p_node", "$1"), nil
}
