package provider_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/client"
)

const deleteRaceBase = `
resource "strata_org" "acme" {
  name = "acme"
}
`

const deleteRaceAll = deleteRaceBase + `
resource "strata_node" "web01" {
  name = "web01"
  org  = strata_org.acme.name
}

resource "strata_pillar" "ntp" {
  target   = "org/${strata_org.acme.name}"
  category = "ntp"
  data     = jsonencode({ servers = ["ntp1.test"] })
}

resource "strata_kind" "database" {
  name   = "Database"
  scope  = "org"
  schema = jsonencode({ type = "object", properties = { engine = { type = "string" } } })
}

resource "strata_object" "main" {
  kind = strata_kind.database.name
  org  = strata_org.acme.name
  name = "main"
  spec = jsonencode({ engine = "postgres" })
}
`

// TestAccConcurrentChangeBeforeDeleteIsAnError: a delete carries what the refresh read too.
// A node, a pillar row and an object changed between Terraform's refresh and its delete
// are not deleted: the apply fails saying so, and each is still there with the change.
func TestAccConcurrentChangeBeforeDeleteIsAnError(t *testing.T) {
	t.Parallel()
	useTerraform(t)
	s := startStrata(t)
	ctx := context.Background()
	p := newInterposer(t, s.url)
	head := regexp.MustCompile(`server = "[^"]*"`).ReplaceAllString(s.providerBlock(""), `server = "`+p.server.URL+`"`)

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: head + deleteRaceAll},
			{
				PreConfig: func() {
					p.arm("DELETE /v1/nodes/web01", func() {
						_, err := s.c.Nodes().Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"keep":"me"}}}`))
						require.NoError(t, err)
					})
					p.arm("DELETE /v1/orgs/acme/pillars/ntp", func() {
						_, err := s.c.PillarSet(ctx, client.PillarTarget{Org: "acme"}, "ntp", json.RawMessage(`{"servers":["theirs.test"]}`), "")
						require.NoError(t, err)
					})
					p.arm("DELETE /v1/orgs/acme/resources/Database/main", func() {
						_, err := s.c.Objects("Database", "acme").Patch(ctx, "main", []byte(`{"spec":{"engine":"mysql"}}`))
						require.NoError(t, err)
					})
				},
				Config:      head + deleteRaceBase,
				ExpectError: regexp.MustCompile(`(?s)(Deleting Node web01 was refused|Node web01 changed).*`),
			},
			{
				// Each is still there, with the change made before the delete. Terraform
				// hands a delete the state as stored, not as the plan's refresh found it, so
				// a plain apply would carry the stale version again: the error says to
				// refresh the state first (terraform apply -refresh-only).
				Config:      head + deleteRaceBase,
				ExpectError: regexp.MustCompile(`(?s)Deleting Node web01 was refused.*terraform apply\s+-refresh-only`),
			},
			{
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
				PreConfig: func() {
					n, err := s.c.Nodes().Get(ctx, "web01")
					require.NoError(t, err, "the node changed before the delete is still there")
					require.Equal(t, "me", n.Metadata.Labels["keep"])
					row, err := s.c.PillarGet(ctx, client.PillarTarget{Org: "acme"}, "ntp")
					require.NoError(t, err, "the row changed before the delete is still there")
					require.JSONEq(t, `{"servers":["theirs.test"]}`, string(row.Data))
					obj, err := s.c.Objects("Database", "acme").Get(ctx, "main")
					require.NoError(t, err, "the object changed before the delete is still there")
					require.JSONEq(t, `{"engine":"mysql"}`, string(obj.Spec))
				},
			},
			{
				// After the refresh, the apply deletes them.
				Config: head + deleteRaceBase,
				Check: func(*terraform.State) error {
					_, err := s.c.Nodes().Get(ctx, "web01")
					require.True(t, client.IsNotFound(err), "%v", err)
					_, err = s.c.PillarGet(ctx, client.PillarTarget{Org: "acme"}, "ntp")
					require.True(t, client.IsNotFound(err), "%v", err)
					_, err = s.c.Objects("Database", "acme").Get(ctx, "main")
					require.True(t, client.IsNotFound(err), "%v", err)
					return nil
				},
			},
		},
	})
}
