package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// everydayExamples are the Examples: sections of the commands a user types every day, keyed
// by command path. They live here, beside each other, rather than in the many files whose
// generic constructors build these commands (node, group and org share one), so that every
// example can be kept in one voice; TestExamplesParse checks each line against the command
// tree, so an example that names a flag or command that does not exist fails the build's
// tests. A command that defines its own Example keeps it; a path that no command has (yet) is
// ignored.
var everydayExamples = map[string]string{
	"strata node create": `  strata node create web01 --org acme --label env=prod --label role=web
  strata node create db01 --org acme --spec db01-spec.json`,
	"strata node get": `  strata node get web01
  strata node get web01 -o yaml`,
	"strata node list": `  strata node list
  strata node list -l 'role=web,!retired' -o json`,
	"strata node label":    `  strata node label web01 tier=frontend env-    # set tier, remove env`,
	"strata node annotate": `  strata node annotate web01 owner=alice ticket-    # set owner, remove ticket`,
	"strata node delete":   `  strata node delete web01`,
	"strata node apply": `  strata node apply -f inventory.ndjson       # one node object per line; idempotent
  cmdb-export | strata node apply -f -`,
	"strata node rename": `  strata node rename web01.old.example.com web01.new.example.com`,

	"strata group create": `  strata group create webservers --org acme --node-selector 'role=web' --priority 10
  strata group create oncall --org acme        # static members only`,
	"strata group list":          `  strata group list --org acme`,
	"strata group get":           `  strata group get webservers --org acme -o yaml`,
	"strata group members":       `  strata group members webservers --org acme`,
	"strata group add-member":    `  strata group add-member webservers db01 db02 --org acme`,
	"strata group remove-member": `  strata group remove-member webservers db02 --org acme`,
	"strata group label":         `  strata group label webservers tier=frontend --org acme`,
	"strata group delete":        `  strata group delete oncall --org acme`,

	"strata org create": `  strata org create acme --label team=net`,
	"strata org list":   `  strata org list`,

	"strata get": `  strata get node web01 -o yaml
  strata get Database --org acme -l env=prod
  strata get Database main --org acme -o yaml`,
	"strata apply": `  strata apply -f main.yaml --org acme
  strata get Database main --org acme -o yaml > main.yaml && strata apply -f main.yaml --org acme`,
	"strata delete": `  strata delete Database main --org acme`,

	"strata kind apply": `  strata kind apply -f database.yaml
  strata kind apply -f database-v2.yaml --dry-run        # the report only
  strata kind apply -f database-v2.yaml --ack /spec/size=readersUpgradedFirst`,
	"strata kind diff":      `  strata kind diff -f database-v2.yaml`,
	"strata kind list":      `  strata kind list`,
	"strata kind get":       `  strata kind get Database -o yaml`,
	"strata kind revisions": `  strata kind revisions Database`,

	"strata pillar get": `  strata pillar get apache --node web01
  strata pillar get ntp --org acme --group webservers -o yaml`,
	"strata pillar delete":  `  strata pillar delete apache --node web01`,
	"strata pillar list":    `  strata pillar list --org acme`,
	"strata pillar render":  `  strata pillar render web01 -o yaml     # what Salt gets for the minion web01`,
	"strata pillar explain": `  strata pillar explain web01            # which row set each value, and what it overrode`,
	"strata pillar history": `  strata pillar history apache --node web01`,

	"strata state list":   `  strata state list net`,
	"strata state show":   `  strata state show net default`,
	"strata state pull":   `  strata state pull net default > net.tfstate`,
	"strata state push":   `  strata state push net default net.tfstate`,
	"strata state lock":   `  strata state lock net default --info "maintenance window"`,
	"strata state unlock": `  strata state unlock net default 9d8c1b2e-8f0a-4d4e-9a51-3c0f7e2b6a10`,
	"strata state versions": `  strata state versions net default
  strata state versions net default 3 > v3.tfstate    # one version's bytes`,
	"strata state restore": `  strata state restore net default 3`,

	"strata token create": `  strata token create ci-net --scope state:write:net`,
	"strata watch":        `  strata watch node -l role=web`,
}

// addExamples gives every command of everydayExamples without an Example its example.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// A command that states its own examples beside its flags (pillar set and edit,
		// project backend-config, pillar restore, state delete) keeps them; the table has none.
		if ex, ok := everydayExamples[c.CommandPath()]; ok && strings.TrimSpace(c.Example) == "" {
			c.Example = ex
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
