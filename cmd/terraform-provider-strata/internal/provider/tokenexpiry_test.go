package provider_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"
)

const tokenExpiryConfig = `
resource "strata_token" "ci" {
  name       = "ci"
  scopes     = ["nodes:read:*"]
  expires_at = %q
}
`

// TestAccTokenExpiry: expires_at that is not an RFC 3339 time is refused by terraform plan
// (validate), naming the attribute, before anything is created; a valid one is the expiry
// the server records.
func TestAccTokenExpiry(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      s.providerBlock("") + sprintf(tokenExpiryConfig, "tomorrow"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid expires_at.*RFC 3339`),
			},
			{
				Config: s.providerBlock("") + sprintf(tokenExpiryConfig, at.Format(time.RFC3339)),
				Check: func(st *terraform.State) error {
					id := st.RootModule().Resources["strata_token.ci"].Primary.ID
					toks, err := s.c.TokenList(ctx)
					require.NoError(t, err)
					for _, tok := range toks {
						if tok.ID == id {
							require.NotNil(t, tok.ExpiresAt)
							require.True(t, at.Equal(*tok.ExpiresAt), "%v", tok.ExpiresAt)
							return nil
						}
					}
					t.Fatalf("token %s not listed", id)
					return nil
				},
			},
		},
	})
}
