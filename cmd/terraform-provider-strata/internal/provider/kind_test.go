package provider_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/stretchr/testify/require"
)

const kindConfig = `
resource "strata_org" "acme" {
  name = "acme"
}

resource "strata_kind" "database" {
  name  = "Database"
  scope = "org"
  schema = jsonencode({
    type = "object"
    properties = {
      engine = { type = "string" }
      size   = { type = %q, default = 10 }
    }
  })
  %s
}

resource "strata_object" "main" {
  kind = strata_kind.database.name
  org  = strata_org.acme.name
  name = "main"
  spec = jsonencode({ engine = "postgres", size = 20 })
}

resource "strata_kind" "region" {
  name   = "Region"
  scope  = "global"
  schema = jsonencode({ type = "object", properties = { zone = { type = "string" } } })
}

resource "strata_object" "eu" {
  kind = strata_kind.region.name
  name = "eu"
  spec = jsonencode({ zone = "eu-west" })
}
`

// TestAccKindEvolution: a schema change the registry wants acknowledged fails the apply
// with the acknowledge block to add (path and rule); with it, the kind's revision 2 is
// registered in place and its objects stay. Global kinds' objects import as <Kind>/<name>.
func TestAccKindEvolution(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	const ack = `acknowledge {
    path = "/properties/size"
    rule = "readersUpgradedFirst"
  }`

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: s.providerBlock("") + sprintf(kindConfig, "integer", ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("strata_kind.database", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("strata_object.eu", tfjsonpath.New("id"), knownvalue.StringExact("Region/eu")),
				},
			},
			{
				// integer -> number widens the type: the registry asks for consent, and the
				// error says how to give it.
				Config:      s.providerBlock("") + sprintf(kindConfig, "number", ""),
				ExpectError: regexp.MustCompile(`(?s)/properties/size.*acknowledge \{ path = "/properties/size" rule =\s+"readersUpgradedFirst" \}`),
			},
			{
				Config: s.providerBlock("") + sprintf(kindConfig, "number", ack),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("strata_kind.database", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				},
				Check: func(*terraform.State) error {
					k, err := s.c.Kind(ctx, "Database")
					require.NoError(t, err)
					require.Equal(t, 2, k.Revision)
					require.JSONEq(t, `{"type":"number","default":10}`, mustSub(t, k.Schema, "properties", "size"))
					return nil
				},
			},
			{ResourceName: "strata_kind.database", ImportState: true, ImportStateId: "Database", ImportStateVerify: true, ImportStateVerifyIgnore: []string{"schema", "acknowledge"}},
			{ResourceName: "strata_object.eu", ImportState: true, ImportStateId: "Region/eu", ImportStateKind: resource.ImportBlockWithID},
			{ResourceName: "strata_object.eu", ImportState: true, ImportStateId: "Region/eu/x/y", ExpectError: regexp.MustCompile(`<Kind>/<org>/<name>`)},
		},
	})

	// Destroyed, the kinds are still registered (the registry has no delete). Applying the
	// configuration again takes each kind whose registered schema and scope are the
	// configured ones as it is; one that differs must be imported first.
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      s.providerBlock("") + strings.Replace(sprintf(kindConfig, "number", ack), `zone = { type = "string" }`, `zone = { type = "string" }, tier = { type = "string" }`, 1),
				ExpectError: regexp.MustCompile(`Kind Region already exists`),
			},
			{
				Config: s.providerBlock("") + sprintf(kindConfig, "number", ack),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("strata_kind.database", tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue("strata_kind.region", tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
				},
			},
		},
	})
}

// mustSub returns the JSON text at keys inside doc.
func mustSub(t *testing.T, doc []byte, keys ...string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(doc, &v))
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%s is not an object", k)
		v = m[k]
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
