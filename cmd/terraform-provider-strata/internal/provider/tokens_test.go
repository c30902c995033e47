package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

const projectTokenConfig = `
resource "strata_project" "net" {
  name      = "net"
  encrypted = %t
}

resource "strata_token" "ci" {
  name   = "ci"
  scopes = ["projects:read:${strata_project.net.name}", "state:read:${strata_project.net.name}"]
}
`

// TestAccProjectAndToken: a project is created, turned encrypted in place and imported; a
// token is created with its secret in the state (which works against the server), cannot be
// imported, comes back when revoked out of band, and is revoked by destroy.
func TestAccProjectAndToken(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	var secret, id string

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: s.providerBlock("") + sprintf(projectTokenConfig, false),
				Check: func(st *terraform.State) error {
					tok := st.RootModule().Resources["strata_token.ci"].Primary
					secret, id = tok.Attributes["secret"], tok.ID
					c, err := client.New(s.url, secret, nil)
					require.NoError(t, err)
					p, err := c.ProjectGet(ctx, "net")
					require.NoError(t, err, "the token's secret from the state works")
					require.False(t, p.Encryption)
					_, err = c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}})
					require.True(t, client.IsForbidden(err), "and grants only its scopes: %v", err)
					return nil
				},
			},
			{
				Config: s.providerBlock("") + sprintf(projectTokenConfig, true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("strata_project.net", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("strata_token.ci", plancheck.ResourceActionNoop),
					},
				},
				Check: func(*terraform.State) error {
					p, err := s.c.ProjectGet(ctx, "net")
					require.NoError(t, err)
					require.True(t, p.Encryption)
					return nil
				},
			},
			{ResourceName: "strata_project.net", ImportState: true, ImportStateId: "net", ImportStateVerify: true},
			{ResourceName: "strata_token.ci", ImportState: true, ImportStateIdFunc: func(*terraform.State) (string, error) { return id, nil },
				ExpectError: regexp.MustCompile(`does not support import`)},
			{
				// Revoked behind Terraform's back: the plan creates it again.
				PreConfig: func() { require.NoError(t, s.c.TokenRevoke(ctx, id)) },
				Config:    s.providerBlock("") + sprintf(projectTokenConfig, true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("strata_token.ci", plancheck.ResourceActionCreate)},
				},
				Check: func(st *terraform.State) error {
					id = st.RootModule().Resources["strata_token.ci"].Primary.ID
					return nil
				},
			},
		},
		CheckDestroy: func(*terraform.State) error {
			_, err := s.c.ProjectGet(ctx, "net")
			require.True(t, client.IsNotFound(err), "project after destroy: %v", err)
			tokens, err := s.c.TokenList(ctx)
			require.NoError(t, err)
			for _, tok := range tokens {
				if tok.ID == id {
					require.NotNil(t, tok.RevokedAt, "token after destroy")
				}
			}
			return nil
		},
	})
}
