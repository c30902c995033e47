package provider_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

const secretBase = `
resource "strata_org" "acme" {
  name = "acme"
}

resource "strata_node" "web01" {
  name = "web01"
  org  = strata_org.acme.name
}

resource "strata_pillar_category" "creds" {
  name   = "creds"
  secret = true
}
`

const secretRow = secretBase + `
resource "strata_pillar" "db" {
  target         = "node/${strata_node.web01.name}"
  category       = strata_pillar_category.creds.name
  sensitive_data = jsonencode({ db = { password = "hunter2" } })
}
`

// TestAccSecretPillar: a secret category's row is sensitive_data, redacted in plans and
// stored encrypted; a change made out of band shows in the plan (the admin token may read
// secrets); a token without pillars:read-secrets on the target cannot manage the row, and
// the plan says which scope it needs; data for a secret category is refused naming the
// attribute; destroy removes the row and then the category's properties.
func TestAccSecretPillar(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	node := client.PillarTarget{Node: "web01"}

	// A token that may read and write pillars but not read secrets.
	limited, err := s.c.TokenCreate(ctx, client.TokenCreateRequest{Name: "no-secrets", Scopes: []string{
		"orgs:read:*", "nodes:read:*", "pillars:read:*", "pillars:write:*",
	}})
	require.NoError(t, err)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: s.providerBlock("") + secretRow,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectSensitiveValue("strata_pillar.db", tfjsonpath.New("sensitive_data"))},
				},
				Check: func(*terraform.State) error {
					row, err := s.c.PillarGetRow(ctx, node, "creds")
					require.NoError(t, err)
					require.True(t, row.Secret)
					require.JSONEq(t, `{"db":{"password":"hunter2"}}`, string(row.Data))
					return nil
				},
			},
			{
				// Someone rotates the password out of band: a token that may read secrets
				// sees it as drift.
				PreConfig: func() {
					_, err := s.c.PillarSet(ctx, node, "creds", json.RawMessage(`{"db":{"password":"rotated"}}`), "")
					require.NoError(t, err)
				},
				Config: s.providerBlock("") + secretRow,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("strata_pillar.db", plancheck.ResourceActionUpdate)},
				},
				Check: func(*terraform.State) error {
					row, err := s.c.PillarGetRow(ctx, node, "creds")
					require.NoError(t, err)
					require.JSONEq(t, `{"db":{"password":"hunter2"}}`, string(row.Data))
					return nil
				},
			},
			{
				// The same configuration with a token lacking read-secrets: the plan stops,
				// naming the scope.
				Config:      s.providerBlock(limited.Secret) + secretRow,
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`needs\s+pillars:read-secrets:node/web01`),
			},
			{
				// data is for plain categories.
				Config: s.providerBlock("") + secretBase + `
resource "strata_pillar" "db" {
  target   = "node/${strata_node.web01.name}"
  category = strata_pillar_category.creds.name
  data     = jsonencode({ db = { password = "hunter2" } })
}
`,
				ExpectError: regexp.MustCompile(`Category creds is secret`),
			},
			{
				Config: s.providerBlock("") + secretRow,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{ResourceName: "strata_pillar_category.creds", ImportState: true, ImportStateId: "creds", ImportStateVerify: true},
			{ResourceName: "strata_pillar.db", ImportState: true, ImportStateId: "node/web01/creds", ImportStateKind: resource.ImportBlockWithID},
		},
		CheckDestroy: func(*terraform.State) error {
			_, err := s.c.PillarCategoryGet(ctx, "creds")
			require.True(t, client.IsNotFound(err), "category after destroy: %v", err)
			_, err = s.c.Nodes().Get(ctx, "web01")
			require.True(t, client.IsNotFound(err), "node after destroy: %v", err)
			return nil
		},
	})
}
