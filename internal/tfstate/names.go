package tfstate

import (
	"hash/fnv"
	"net/url"
	"regexp"
	"strings"

	"github.com/stratahq/strata/internal/fault"
)

// projectRE is a project name: a plain lower-case PostgreSQL identifier, so the schema name
// needs no quoting to mean the same thing in Terraform's conn_str users' hands, and the
// pg backend's schema_name is the project name exactly.
var projectRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// maxWorkspaceName bounds a workspace name (the pg backend's column is unbounded text).
const maxWorkspaceName = 255

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

// ValidateWorkspace checks a workspace name with Terraform's own rule — a name that is its
// own URL path segment (url.PathEscape leaves it unchanged) — so every workspace a pg client
// can create through Terraform is reachable over HTTP too. "." and ".." are refused: URL
// paths cannot carry them as segments.
func ValidateWorkspace(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxWorkspaceName || url.PathEscape(name) != name {
		return fault.Invalid("/workspace", "workspace name %q must be 1-%d characters that need no escaping in a URL path (Terraform's rule)", name, maxWorkspaceName)
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
