package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

// scenarioConfig is the acceptance configuration of issue 33: an org, nodes, a selector
// group, pillars at org, group and node level, a kind and an object, and both data sources.
const scenarioConfig = `
resource "strata_org" "acme" {
  name   = "acme"
  labels = { tier = "gold" }
}

resource "strata_node" "web01" {
  name   = "web01"
  org    = strata_org.acme.name
  labels = { role = "web" }
}

resource "strata_node" "x" {
  name   = "web02"
  org    = strata_org.acme.name
  labels = { role = "web" }
}

resource "strata_node" "db01" {
  name   = "db01"
  org    = strata_org.acme.name
  labels = { role = "db" }
}

resource "strata_group" "web" {
  org      = strata_org.acme.name
  name     = "web"
  priority = 10
  selector = "role=web"
  members  = [strata_node.db01.name]
}

resource "strata_pillar" "org_ntp" {
  target   = "org/${strata_org.acme.name}"
  category = "ntp"
  data     = jsonencode({ servers = ["ntp1.acme.test"], iburst = true })
}

resource "strata_pillar" "web_app" {
  target   = "group/${strata_group.web.org}/${strata_group.web.name}"
  category = "app"
  data     = jsonencode({ port = 8080, workers = 4 })
}

resource "strata_pillar" "web01_ntp" {
  target   = "node/${strata_node.web01.name}"
  category = "ntp"
  data     = jsonencode({ servers = ["ntp.web01.test"] })
}

resource "strata_kind" "database" {
  name  = "Database"
  scope = "org"
  schema = jsonencode({
    type = "object"
    properties = {
      engine = { type = "string" }
      size   = { type = "integer", default = 10 }
    }
  })
}

resource "strata_object" "main" {
  kind   = strata_kind.database.name
  org    = strata_org.acme.name
  name   = "main"
  labels = { team = "data" }
  spec   = jsonencode({ engine = "postgres" })
}

data "strata_nodes" "web" {
  selector   = "role=web"
  org        = strata_org.acme.name
  depends_on = [strata_node.web01, strata_node.x, strata_node.db01]
}

data "strata_node_pillar" "web01" {
  node       = strata_node.web01.name
  depends_on = [strata_pillar.org_ntp, strata_pillar.web_app, strata_pillar.web01_ntp, strata_group.web]
}
`

// TestAccScenario is issue 33's acceptance: apply creates everything against a fresh
// server, a plan right after shows no changes, a label changed out of band shows as an
// update (and applying puts it back), `terraform import strata_node.x web02` and the other
// import IDs work, and destroy removes it all.
func TestAccScenario(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	config := s.providerBlock("") + scenarioConfig

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.strata_nodes.web", tfjsonpath.New("names"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("web01"), knownvalue.StringExact("web02")})),
					statecheck.ExpectKnownValue("data.strata_node_pillar.web01", tfjsonpath.New("data"), knownvalue.StringFunc(func(v string) error {
						var got map[string]any
						if err := json.Unmarshal([]byte(v), &got); err != nil {
							return err
						}
						// Categories fold into one object: org's ntp, then the group's app, then
						// the node's ntp over the org's servers.
						want := map[string]any{"servers": []any{"ntp.web01.test"}, "iburst": true, "port": float64(8080), "workers": float64(4)}
						if fmt.Sprint(got) != fmt.Sprint(want) {
							return fmt.Errorf("merged pillar of web01: got %v, want %v", got, want)
						}
						return nil
					})),
					statecheck.ExpectKnownValue("strata_group.web", tfjsonpath.New("id"), knownvalue.StringExact("acme/web")),
					statecheck.ExpectKnownValue("strata_pillar.web01_ntp", tfjsonpath.New("id"), knownvalue.StringExact("node/web01/ntp")),
					statecheck.ExpectKnownValue("strata_object.main", tfjsonpath.New("id"), knownvalue.StringExact("Database/acme/main")),
					statecheck.ExpectKnownValue("strata_kind.database", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				},
				Check: func(*terraform.State) error {
					// What the server holds, read back through the API.
					g, err := s.c.Groups("acme").Members(ctx, "web")
					require.NoError(t, err)
					require.Equal(t, []client.Member{
						{Node: "db01", Static: true},
						{Node: "web01", Selected: true},
						{Node: "web02", Selected: true},
					}, g)
					obj, err := s.c.Objects("Database", "acme").Get(ctx, "main")
					require.NoError(t, err)
					require.JSONEq(t, `{"engine":"postgres","size":10}`, string(obj.Spec), "the kind's default is filled in, and is not drift")
					org, err := s.c.Orgs().Get(ctx, "acme")
					require.NoError(t, err)
					require.Equal(t, map[string]string{"tier": "gold"}, org.Metadata.Labels)
					return nil
				},
			},
			{
				// The same configuration again: nothing to do.
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Someone changes web01's labels behind Terraform's back: the plan shows it as
				// an update of that node alone, and applying puts the labels back.
				PreConfig: func() {
					_, err := s.c.Nodes().Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"role":"db","owner":"someone-else"}}}`))
					require.NoError(t, err)
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("strata_node.web01", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("strata_node.web01", tfjsonpath.New("labels"), knownvalue.MapExact(map[string]knownvalue.Check{"role": knownvalue.StringExact("web")})),
						plancheck.ExpectResourceAction("strata_node.x", plancheck.ResourceActionNoop),
						plancheck.ExpectResourceAction("strata_org.acme", plancheck.ResourceActionNoop),
					},
				},
				Check: func(*terraform.State) error {
					n, err := s.c.Nodes().Get(ctx, "web01")
					require.NoError(t, err)
					require.Equal(t, map[string]string{"role": "web"}, n.Metadata.Labels)
					return nil
				},
			},
			// terraform import strata_node.x web02, and every other import ID.
			{ResourceName: "strata_node.x", ImportState: true, ImportStateId: "web02", ImportStateVerify: true},
			{ResourceName: "strata_org.acme", ImportState: true, ImportStateId: "acme", ImportStateVerify: true},
			{ResourceName: "strata_group.web", ImportState: true, ImportStateId: "acme/web", ImportStateVerify: true},
			// The JSON attributes hold the server's text after a `terraform import` (compared
			// literally by ImportStateVerify, so ignored there); an import block's plan shows
			// that the configuration's text is the same value: no update.
			{ResourceName: "strata_pillar.web01_ntp", ImportState: true, ImportStateId: "node/web01/ntp", ImportStateVerify: true, ImportStateVerifyIgnore: []string{"data"}},
			{ResourceName: "strata_pillar.web_app", ImportState: true, ImportStateId: "group/acme/web/app", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_pillar.org_ntp", ImportState: true, ImportStateId: "org/acme/ntp", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_object.main", ImportState: true, ImportStateId: "Database/acme/main", ImportStateVerify: true, ImportStateVerifyIgnore: []string{"spec"}},
			{ResourceName: "strata_object.main", ImportState: true, ImportStateId: "Database/acme/main", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_kind.database", ImportState: true, ImportStateId: "Database", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_node.x", ImportState: true, ImportStateId: "web02/extra", ExpectError: regexp.MustCompile(`(?s)Cannot import non-existent remote object|not found`)},
		},
		CheckDestroy: func(*terraform.State) error {
			for _, n := range []string{"web01", "web02", "db01"} {
				_, err := s.c.Nodes().Get(ctx, n)
				require.True(t, client.IsNotFound(err), "node %s after destroy: %v", n, err)
			}
			_, err := s.c.Orgs().Get(ctx, "acme")
			require.True(t, client.IsNotFound(err), "org acme after destroy: %v", err)
			_, err = s.c.PillarGet(ctx, client.PillarTarget{Org: "acme"}, "ntp")
			require.True(t, client.IsNotFound(err), "org pillar after destroy: %v", err)
			_, err = s.c.Objects("Database", "acme").Get(ctx, "main")
			require.True(t, client.IsNotFound(err), "object after destroy: %v", err)
			// The registry keeps every revision of a kind and has no delete.
			k, err := s.c.Kind(ctx, "Database")
			require.NoError(t, err)
			require.Equal(t, 1, k.Revision)
			return nil
		},
	})
}
