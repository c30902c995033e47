package provider_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// secretEchoConfig writes a secret row that its category's kind refuses: the password
// breaks the pattern and the mode is not one of the enum's values. Both values hold "€",
// which nothing else in Terraform's output does, so the test can tell they were not shown.
const secretEchoConfig = `
resource "strata_kind" "creds" {
  name  = "Creds"
  scope = "global"
  schema = jsonencode({
    type = "object"
    properties = {
      password = { type = "string", pattern = "^[a-f0-9]+$" }
      mode     = { type = "string", enum = ["a", "b"] }
    }
  })
}

resource "strata_pillar_category" "creds" {
  name   = "creds"
  kind   = strata_kind.creds.name
  secret = true
}

resource "strata_pillar" "creds" {
  target   = "global"
  category = strata_pillar_category.creds.name
  sensitive_data = jsonencode({
    password = "hunter2-€-pw"
    mode     = "hunter3-€-mode"
  })
}
`

// TestAccRefusedSecretRowIsNotEchoed: the server explains a row its kind refuses field by
// field, quoting the value to a writer that may read secrets (the admin token here). The
// provider's error would print those quotes in Terraform's output (and CI logs), while
// sensitive_data exists to keep them out: the error names each field and keyword, never
// the value.
func TestAccRefusedSecretRowIsNotEchoed(t *testing.T) {
	const (
		modeLine     = `/mode: enum: the value is secret and not shown`
		passwordLine = `/password: pattern: the value is secret and not shown`
	)
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: s.providerBlock("") + secretEchoConfig,
				// Both fields are named, in either order (the validator's order of the two
				// findings is not fixed), and no "€" appears anywhere.
				ExpectError: regexp.MustCompile(`\A[^€]*(` + modeLine + `[^€]*` + passwordLine + `|` + passwordLine + `[^€]*` + modeLine + `)[^€]*\z`),
			},
		},
	})
}
