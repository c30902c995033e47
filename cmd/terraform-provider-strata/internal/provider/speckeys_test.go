package provider_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

const specKeysConfig = `
resource "strata_org" "acme" {
  name = "acme"
}

resource "strata_kind" "database" {
  name  = "Database"
  scope = "org"
  schema = jsonencode({
    type = "object"
    properties = {
      engine   = { type = "string" }
      replicas = { type = "integer" }
      size     = { type = "integer", default = 10 }
    }
  })
}

resource "strata_pillar_category" "app" {
  name = "app"
  kind = strata_kind.database.name
}

resource "strata_object" "main" {
  kind = strata_kind.database.name
  org  = strata_org.acme.name
  name = "main"
  spec = jsonencode(%s)
}

resource "strata_pillar" "app" {
  target   = "org/${strata_org.acme.name}"
  category = strata_pillar_category.app.name
  data     = jsonencode(%s)
}
`

// TestAccRemovedSpecKeyIsApplied: a key taken out of an object's spec, or out of a row of a
// kind-bound category, is removed on the server. Both compare by "covers" so that the
// defaults the kind's schema fills in are not drift; that must not also hide a key the
// configuration itself used to set and no longer does.
func TestAccRemovedSpecKeyIsApplied(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	withReplicas := `{ engine = "postgres", replicas = 3 }`
	without := `{ engine = "postgres" }`

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: s.providerBlock("") + sprintf(specKeysConfig, withReplicas, withReplicas)},
			{
				Config: s.providerBlock("") + sprintf(specKeysConfig, without, without),
				Check: func(*terraform.State) error {
					obj, err := s.c.Objects("Database", "acme").Get(ctx, "main")
					require.NoError(t, err)
					require.JSONEq(t, `{"engine":"postgres","size":10}`, string(obj.Spec))
					row, err := s.c.PillarGetRow(ctx, client.PillarTarget{Org: "acme"}, "app")
					require.NoError(t, err)
					require.JSONEq(t, `{"engine":"postgres","size":10}`, string(row.Data))
					return nil
				},
			},
			// An import stores the server's spec, defaults included: a configuration that
			// leaves the defaults out still plans no change.
			{ResourceName: "strata_object.main", ImportState: true, ImportStateId: "Database/acme/main", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_pillar.app", ImportState: true, ImportStateId: "org/acme/app", ImportStateKind: resource.ImportBlockWithID},
		},
	})
}
