// Package archtest enforces the dependency rules of DESIGN.md and that every package has a
// doc comment, so the architecture shown by the layout cannot erode silently.
package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Deps       []string
	// TestImports and XTestImports are the imports of the package's own and external test
	// files: the client rule below covers tests too, where a domain test could otherwise
	// keep the public client and the core coupled.
	TestImports  []string
	XTestImports []string
	Name         string
	GoFiles      []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/stratahq/strata/...").Output()
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

const mod = "github.com/stratahq/strata/"

func TestDependencyRules(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/jackc/") {
				require.True(t, rel == dbPkg || strings.HasPrefix(rel, dbPkg+"/"), "only internal/db and its subpackages may import pgx (%s imports %s)", rel, imp)
			}
			// internal/testserver serves the API to other packages' tests (the client's): it is
			// HTTP by purpose, and only tests may import it.
			require.NotEqual(t, mod+testServerPkg, imp, "%s imports %s, which only tests may use", rel, imp)
			if strings.HasPrefix(rel, "internal/") && rel != "internal/httpapi" && rel != "internal/server" && rel != "internal/cli" && rel != testServerPkg && imp == "net/http" {
				t.Errorf("capability package %s must not import net/http", rel)
			}
			if rel == "internal/httpapi" {
				require.False(t, strings.HasPrefix(imp, "github.com/jackc/"), "httpapi must not import pgx")
				// The HTTP layer knows faults, not the database: database errors carry their
				// fault (fault.Faulter), so problem writing needs no import of internal/db.
				require.False(t, imp == mod+dbPkg || strings.HasPrefix(imp, mod+dbPkg+"/"), "httpapi must not import %s (use internal/fault)", imp)
			}
		}
		// The wire types live in package api, which the server side and the public client
		// share; the server side must not import the client itself, or the client and the
		// core could not change apart (issue 33). The HTTP layer's tests drive the server
		// through the real client, so only its non-test code is held to that; every other
		// internal package is held to it in its tests too.
		if strings.HasPrefix(rel, "internal/") && rel != "internal/cli" {
			for _, imp := range p.Imports {
				require.NotEqual(t, mod+"client", imp, "%s must take wire types from package api, not import the public client", rel)
			}
			if rel != "internal/httpapi" {
				for _, imp := range append(append([]string{}, p.TestImports...), p.XTestImports...) {
					require.NotEqual(t, mod+"client", imp, "the tests of %s must take wire types from package api, not import the public client", rel)
				}
			}
		}
		if rel == "api" {
			for _, d := range p.Deps {
				require.False(t, strings.HasPrefix(d, mod), "package api must import nothing of strata (%s)", d)
			}
		}
		if rel == "client" {
			for _, d := range p.Deps {
				require.False(t, strings.HasPrefix(d, mod+"internal/"), "the public client must not depend on internal packages (%s)", d)
			}
		}
		if strings.HasPrefix(rel, providerPkg) {
			for _, imp := range p.Imports {
				// The Terraform provider is a client like any other: it can do nothing a
				// token could not do through the API (its tests start a server, not it).
				require.False(t, strings.HasPrefix(imp, mod+"internal/"), "the Terraform provider talks to strata only through the client package (%s imports %s)", rel, imp)
			}
		}
		if rel == "internal/cli" {
			for _, imp := range p.Imports {
				if strings.HasPrefix(imp, mod+"internal/") {
					// The serve, migrate and doctor commands reach the database only through
					// internal/server, never internal/db itself.
					require.Contains(t, []string{mod + "internal/server", mod + "internal/pgembed"}, imp,
						"client commands use only the client package; serve/migrate/doctor reach the server side through internal/server (%s)", imp)
				}
			}
		}
	}
}

// dbPkg is the one seam to PostgreSQL: it and the packages under it (dbadmin; migrations
// imports nothing of pgx) alone may import pgx.
const dbPkg = "internal/db"

// testServerPkg starts a whole API for tests outside internal/httpapi.
const testServerPkg = "internal/testserver"

// namedPackages are the packages the rules above name; a rule about a package that was
// renamed or removed would pass silently, so they must all exist.
var namedPackages = []string{dbPkg, "internal/db/dbadmin", "internal/db/migrations", "internal/httpapi", "internal/server", "internal/cli", "internal/pgembed", "client", "api", testServerPkg, providerPkg + "/internal/provider"}

// providerPkg is the Terraform provider's tree.
const providerPkg = "cmd/terraform-provider-strata"

func TestNamedPackagesExist(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, p := range listPackages(t) {
		have[strings.TrimPrefix(p.ImportPath, mod)] = true
	}
	for _, n := range namedPackages {
		require.True(t, have[n], "the architecture test names %s, which no longer exists: update the rule", n)
	}
}

func TestEveryPackageHasDoc(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t) {
		if len(p.GoFiles) == 0 {
			continue // test-only package
		}
		require.NotEmpty(t, p.Doc, "%s needs a package doc comment", p.ImportPath)
	}
}
