package provider_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// interposer is a loopback proxy in front of strata that, when armed for a method and path,
// runs a change of its own just before forwarding that request: the change lands after
// Terraform's refresh and before its write, the window optimistic concurrency guards.
type interposer struct {
	mu     sync.Mutex
	armed  map[string]func()
	server *httptest.Server
}

func newInterposer(t *testing.T, target string) *interposer {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &interposer{armed: map[string]func(){}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		fn := p.armed[r.Method+" "+r.URL.Path]
		delete(p.armed, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
		if fn != nil {
			fn()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(p.server.Close)
	return p
}

func (p *interposer) arm(methodPath string, fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed[methodPath] = fn
}

const concurrencyConfig = `
resource "strata_org" "acme" {
  name = "acme"
}

resource "strata_node" "web01" {
  name   = "web01"
  org    = strata_org.acme.name
  labels = { role = "%s" }
}

resource "strata_pillar" "ntp" {
  target   = "node/${strata_node.web01.name}"
  category = "ntp"
  data     = jsonencode({ servers = ["%s"] })
}
`

// TestAccConcurrentChangeIsAnError: a change someone makes between Terraform's refresh and
// its write is not overwritten: the write carries the resourceVersion (a node) or ETag (a
// pillar row) the refresh read, the server refuses it, and the apply fails saying so. The
// next apply plans against the current object and succeeds.
func TestAccConcurrentChangeIsAnError(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	p := newInterposer(t, s.url)
	head := s.providerBlock("")
	head = regexp.MustCompile(`server = "[^"]*"`).ReplaceAllString(head, `server = "`+p.server.URL+`"`)
	config := func(role, ntp string) string {
		return head + sprintf(concurrencyConfig, role, ntp)
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config("web", "ntp1.test")},
			{
				PreConfig: func() {
					p.arm("PATCH /v1/nodes/web01", func() {
						_, err := s.c.Nodes().Patch(ctx, "web01", []byte(`{"metadata":{"annotations":{"changed-by":"someone-else"}}}`))
						require.NoError(t, err)
					})
				},
				Config:      config("app", "ntp1.test"),
				ExpectError: regexp.MustCompile(`(?s)Node web01 changed on the server since\s+Terraform read it.*resourceVersion`),
			},
			{
				PreConfig: func() {
					p.arm("PUT /v1/nodes/web01/pillars/ntp", func() {
						_, err := s.c.PillarSet(ctx, client.PillarTarget{Node: "web01"}, "ntp", json.RawMessage(`{"servers":["theirs.test"]}`), "")
						require.NoError(t, err)
					})
				},
				Config:      config("app", "ntp2.test"),
				ExpectError: regexp.MustCompile(`(?s)Pillar row node/web01/ntp changed on the\s+server since Terraform read it`),
			},
			{
				// Nothing armed: the apply plans against the current objects (the
				// annotation someone added is drift, removed) and succeeds.
				Config: config("app", "ntp2.test"),
				Check: func(*terraform.State) error {
					n, err := s.c.Nodes().Get(ctx, "web01")
					require.NoError(t, err)
					require.Equal(t, map[string]string{"role": "app"}, n.Metadata.Labels)
					require.Empty(t, n.Metadata.Annotations)
					row, err := s.c.PillarGet(ctx, client.PillarTarget{Node: "web01"}, "ntp")
					require.NoError(t, err)
					require.JSONEq(t, `{"servers":["ntp2.test"]}`, string(row.Data))
					return nil
				},
			},
		},
	})
}
