package tfstate

import (
	"context"
	"testing"

	"github.com/stratahq/strata/internal/db"
)

// BenchmarkWorkspaceList lists a project of 1,000 workspaces whose states are 1 MiB each
// (one root output of 1 MiB), the shape of a large Terraform estate. The states are
// inserted by one statement, as a pg backend client would write them, so the versions
// trigger records each one. What it measures is the list's cost per call, which must not
// grow with the size of the states.
func BenchmarkWorkspaceList(b *testing.B) {
	svc := benchService(b, false)
	ctx := context.Background()
	if _, err := svc.db.Exec(ctx, (&db.Query{Name: "seed", Text: `INSERT INTO {{project}}.states (name, data)
		SELECT 'w' || lpad(g::text, 4, '0'),
			'{"version": 4, "terraform_version": "1.11.4", "serial": ' || g || ', "lineage": "bench-' || g || '", ' ||
			'"outputs": {"blob": {"value": "' || repeat('x', 1 << 20) || '", "type": "string"}}, "resources": [], "check_results": null}'
		FROM generate_series(1, 1000) g`}).WithIdent("project", "p")); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		ws, _, err := svc.WorkspaceList(ctx, "p", WorkspaceListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(ws) != 1000 || ws[999].Serial == nil || *ws[999].Serial != 1000 {
			b.Fatalf("want 1000 workspaces, the last at serial 1000; got %d", len(ws))
		}
	}
}
