package provider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

const driftConfig = `
resource "strata_org" "acme" {
  name = "acme"
}

resource "strata_node" "web01" {
  name = "web01"
  org  = strata_org.acme.name
}

resource "strata_node" "db01" {
  name = "db01"
  org  = strata_org.acme.name
}

resource "strata_group" "web" {
  org      = strata_org.acme.name
  name     = "web"
  priority = 5
  members  = [strata_node.web01.name]
}

resource "strata_pillar" "ntp" {
  target   = "org/${strata_org.acme.name}"
  category = "ntp"
  data     = jsonencode({ servers = ["ntp1.test"] })
}

resource "strata_kind" "database" {
  name   = "Database"
  scope  = "org"
  schema = jsonencode({ type = "object", properties = { engine = { type = "string" }, size = { type = "integer", default = 10 } } })
}

resource "strata_object" "main" {
  kind = strata_kind.database.name
  org  = strata_org.acme.name
  name = "main"
  spec = jsonencode({ engine = "postgres" })
}
`

// TestAccDriftOfEveryManagedAttribute: besides labels (TestAccScenario), a pillar row's data,
// a group's static members and priority, and an object's spec changed out of band each plan
// an update of that resource alone, and the apply puts back what the configuration says.
func TestAccDriftOfEveryManagedAttribute(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	config := s.providerBlock("") + driftConfig

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					_, err := s.c.PillarSet(ctx, client.PillarTarget{Org: "acme"}, "ntp", json.RawMessage(`{"servers":["theirs.test"]}`), "")
					require.NoError(t, err)
					groups := s.c.Groups("acme")
					require.NoError(t, groups.AddMember(ctx, "web", "db01"))
					_, err = groups.Patch(ctx, "web", []byte(`{"spec":{"priority":7}}`))
					require.NoError(t, err)
					_, err = s.c.Objects("Database", "acme").Patch(ctx, "main", []byte(`{"spec":{"engine":"mysql"}}`))
					require.NoError(t, err)
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("strata_pillar.ntp", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("strata_group.web", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("strata_object.main", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("strata_node.web01", plancheck.ResourceActionNoop),
						plancheck.ExpectResourceAction("strata_kind.database", plancheck.ResourceActionNoop),
					},
				},
				Check: func(*terraform.State) error {
					row, err := s.c.PillarGet(ctx, client.PillarTarget{Org: "acme"}, "ntp")
					require.NoError(t, err)
					require.JSONEq(t, `{"servers":["ntp1.test"]}`, string(row.Data))
					ms, err := s.c.Groups("acme").Members(ctx, "web")
					require.NoError(t, err)
					require.Equal(t, []client.Member{{Node: "web01", Static: true}}, ms)
					g, err := s.c.Groups("acme").Get(ctx, "web")
					require.NoError(t, err)
					require.JSONEq(t, `{"priority":5}`, string(g.Spec))
					obj, err := s.c.Objects("Database", "acme").Get(ctx, "main")
					require.NoError(t, err)
					require.JSONEq(t, `{"engine":"postgres","size":10}`, string(obj.Spec))
					return nil
				},
			},
			{
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
