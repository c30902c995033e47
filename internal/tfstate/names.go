package tfstate

import (
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// projectRE is a project name: a plain lower-case PostgreSQL identifier, so the schema name
// needs no quoting to mean the same thing in Terraform's conn_str users' hands, and the
// pg backend's schema_name is the project name exactly.
var projectRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// workspaceRE is a workspace name that is also a URL path segment, the rule Terraform
// applies to workspace names.
var workspaceRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$`)

// ValidateProject checks a project name: a lower-case identifier that is not strata's own
// schema, public, information_schema or a pg_ system schema.
func ValidateProject(name, strataSchema string) error {
	if !projectRE.MatchString(name) {
		return fault.Invalid("/project", "project name %q must match %s", name, projectRE)
	}
	if name == strataSchema || name == "public" || name == "information_schema" || strings.HasPrefix(name, "pg_") {
		return fault.Invalid("/project", "project name %q is reserved", name)
	}
	return nil
}

// ValidateWorkspace checks a workspace name.
func ValidateWorkspace(name string) error {
	if !workspaceRE.MatchString(name) {
		return fault.Invalid("/workspace", "workspace name %q must match %s", name, workspaceRE)
	}
	return nil
}

// TerraformCreationKey is the advisory key Terraform's pg backend (every release up to at
// least 1.11, and OpenTofu before 1.10) takes to create any workspace in any schema.
const TerraformCreationKey int64 = -1

// OpenTofuCreationKey is the advisory key OpenTofu's pg backend (1.10 and later) takes to
// create a workspace in schema and table: -int64(FNV-1 32-bit of schema + "\x00" + table).
// It is FNV-1, not FNV-1a, over the unquoted names; the result lies in [-(2^32-1), 0], so it
// never meets a row id (row ids are positive). OpenTofu's RFC and docs say "a hash of the
// schema name"; the code, which is what counts, hashes schema and table.
func OpenTofuCreationKey(schema, table string) int64 {
	h := fnv.New32()
	h.Write([]byte(schema + "\x00" + table))
	return -int64(h.Sum32())
}
