// Package migrations is strata's schema history: the embedded NNNN_name.sql files beside
// this file, their headers (`-- strata:compatible-since N`, `-- strata:no-transaction`), and
// the rules a set must obey (contiguous versions, every header declared). It is apart from
// the runner in internal/db because what the schema is and how it is applied change for
// different reasons: a new capability adds a file here; the runner changes only when the way
// of applying does. It imports nothing of strata's, so tests and tools can read a set without
// a database.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var migrationFS embed.FS

// Migration is one schema change.
type Migration struct {
	Version int64
	Name    string
	SQL     string
	// CompatibleSince is the lowest embedded-schema version (the highest migration a release
	// embeds) a strata binary must know to run on the schema this migration produces. A
	// purely additive migration declares the previous version, so the previous release keeps
	// running during a staged rollout. Declared by the header `-- strata:compatible-since N`.
	CompatibleSince int64
	// NoTransaction marks a migration that must run outside a transaction, such as CREATE
	// INDEX CONCURRENTLY (header `-- strata:no-transaction`). It must be re-runnable: a failure
	// half-way leaves what it did so far, unrecorded, and the next run starts it again.
	NoTransaction bool
}

var (
	migrationFileRE = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)
	directiveRE     = regexp.MustCompile(`^--\s*strata:([a-z-]+)\s*(.*?)\s*$`)
)

// Embedded returns the embedded migrations in version order. It fails on a gap, a
// duplicate version, or a missing or malformed header, so two branches adding the same
// number cannot both land and no migration can forget to declare its compatibility.
func Embedded() ([]Migration, error) {
	return Parse(migrationFS)
}

// Parse reads the NNNN_name.sql files at the root of fsys. Tests build their own
// migration sets with it (fstest.MapFS) and run them with db.MigrateOptions.Migrations.
func Parse(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		m := migrationFileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: name must be NNNN_name.sql", e.Name())
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		mig := Migration{Version: v, Name: m[2], SQL: string(b)}
		if err := parseHeaders(&mig); err != nil {
			return nil, fmt.Errorf("migration file %q: %w", e.Name(), err)
		}
		ms = append(ms, mig)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != int64(i+1) {
			return nil, fmt.Errorf("migration versions must be contiguous from 1: found %04d at position %d", m.Version, i+1)
		}
	}
	return ms, nil
}

// parseHeaders reads the `-- strata:` directive lines of a migration. Every migration must
// declare compatible-since; an unknown or repeated directive is an error rather than ignored.
func parseHeaders(m *Migration) error {
	seen := map[string]bool{}
	for _, line := range strings.Split(m.SQL, "\n") {
		d := directiveRE.FindStringSubmatch(strings.TrimSpace(line))
		if d == nil {
			continue
		}
		name, arg := d[1], d[2]
		if seen[name] {
			return fmt.Errorf("header strata:%s given twice", name)
		}
		seen[name] = true
		switch name {
		case "compatible-since":
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n < 1 {
				return fmt.Errorf("header strata:compatible-since %q: want a migration version (a positive integer)", arg)
			}
			if n > m.Version {
				return fmt.Errorf("header strata:compatible-since %d is above the migration's own version %d", n, m.Version)
			}
			m.CompatibleSince = n
		case "no-transaction":
			if arg != "" {
				return fmt.Errorf("header strata:no-transaction takes no argument, got %q", arg)
			}
			m.NoTransaction = true
		default:
			return fmt.Errorf("unknown header strata:%s (known: compatible-since, no-transaction)", name)
		}
	}
	if m.CompatibleSince == 0 {
		return errors.New("missing header line `-- strata:compatible-since N` (the lowest schema version a strata release must know to run on this schema; the previous version for an additive change)")
	}
	return nil
}

// Latest is the highest embedded migration version: the schema version this strata
// knows.
func Latest() int64 {
	ms, err := Embedded()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Hash identifies the embedded migration set; tests name their template database
// after it so a changed migration builds a new template.
func Hash() string {
	ms, _ := Embedded()
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%d\x00%s\x00%s\x00", m.Version, m.Name, m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))
}
