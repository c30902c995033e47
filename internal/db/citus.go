package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed citus.sql
var citusFS embed.FS

var citusQ = MustParseQueries(citusFS, "citus.sql")

// Citus describes the Citus cluster strata's database belongs to (docs/scale-out.md): strata
// distributes each Terraform project's schema over its workers and keeps everything else on
// the coordinator, where it works as on one PostgreSQL.
type Citus struct {
	// Extension is the citus extension's version in the database (e.g. "13.2-1").
	Extension string `json:"extension"`
	// Version is Citus's build string (citus_version()).
	Version string `json:"version"`
	// Coordinator is the coordinator's host:port as the cluster's metadata names it (empty
	// when none is registered: a single-node Citus without citus_set_coordinator_host).
	Coordinator string `json:"coordinator,omitempty"`
	// Workers are the active nodes that may hold shards other than the coordinator.
	Workers []string `json:"workers"`
}

// String is one line for logs and doctor.
func (c *Citus) String() string {
	return fmt.Sprintf("%s (extension %s), coordinator %s, %d worker(s) %v", c.Version, c.Extension, orNone(c.Coordinator), len(c.Workers), c.Workers)
}

func orNone(s string) string {
	if s == "" {
		return "(not registered)"
	}
	return s
}

// DetectCitus reports the Citus cluster the database belongs to, or nil on plain PostgreSQL
// (and where the Citus library is loaded but the extension not created in this database).
func (d *DB) DetectCitus(ctx context.Context) (*Citus, error) {
	var c Citus
	err := d.QueryRow(ctx, citusQ.Get("CitusVersion")).Scan(&c.Extension, &c.Version)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := d.Query(ctx, citusQ.Get("CitusNodes"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	c.Workers = []string{}
	for rows.Next() {
		var host string
		var port, group int
		var active, shards bool
		if err := rows.Scan(&host, &port, &group, &active, &shards); err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("%s:%d", host, port)
		if group == 0 {
			c.Coordinator = addr
		} else if active {
			c.Workers = append(c.Workers, addr)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// RemoteNodeDown reports whether err is Citus's failure to reach another node of the cluster
// (the coordinator answered, a worker did not: "connection to the remote node … failed"), and
// which node. Only the projects on that worker are affected, so callers name the project.
func RemoteNodeDown(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "08") {
		return "", false
	}
	const prefix = "connection to the remote node "
	if !strings.HasPrefix(pgErr.Message, prefix) {
		return "", false
	}
	node, _, _ := strings.Cut(strings.TrimPrefix(pgErr.Message, prefix), " ")
	if _, host, ok := strings.Cut(node, "@"); ok {
		node = host
	}
	return node, true
}
