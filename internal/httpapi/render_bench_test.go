package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkColdRender is one uncached render over HTTP (no render cache, as with
// --session-database-url off): the node, its org, two groups and eight pillar rows of about
// 1 KB each, merged, authenticated with a token. It is what a cold render costs strata on top
// of PostgreSQL's work.
func BenchmarkColdRender(b *testing.B) {
	bundle := setup(b)
	must := func(method, path, body string) {
		r := bundle.do(b, method, path, bundle.admin, strings.NewReader(body))
		if r.status >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
	}
	must("POST", "/v1/orgs", `{"metadata":{"name":"acme"}}`)
	must("POST", "/v1/nodes", `{"metadata":{"name":"web01","labels":{"role":"web"}},"spec":{"org":"acme"}}`)
	must("POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"web"},"spec":{"selector":"role=web"}}`)
	must("POST", "/v1/orgs/acme/groups", `{"metadata":{"name":"all"},"spec":{"selector":"!none"}}`)
	row := func(i int) string {
		var sb strings.Builder
		sb.WriteString(`{"svc`)
		fmt.Fprint(&sb, i)
		sb.WriteString(`":{`)
		for k := range 20 {
			if k > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"key%02d":"value-%02d-%s"`, k, k, strings.Repeat("x", 30))
		}
		sb.WriteString(`}}`)
		return sb.String()
	}
	for i, target := range []string{"/v1/pillars/global", "/v1/orgs/acme/pillars", "/v1/orgs/acme/groups/web/pillars", "/v1/orgs/acme/groups/all/pillars", "/v1/nodes/web01/pillars"} {
		must("PUT", fmt.Sprintf("%s/c%d", target, i), row(i))
	}
	for i := 5; i < 8; i++ {
		must("PUT", fmt.Sprintf("/v1/nodes/web01/pillars/c%d", i), row(i))
	}
	b.ResetTimer()
	for b.Loop() {
		r := bundle.do(b, "GET", "/v1/nodes/web01/pillar", bundle.admin, nil)
		if r.status != 200 {
			b.Fatal(r.status)
		}
	}
}
