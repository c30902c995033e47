package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stratahq/strata/internal/fault"
)

// Operations of the installation as a whole (issue 28): a restored database's new history and
// the check of the login-role operation for `strata doctor`. Their SQL is in operations.sql.

//go:embed operations.sql
var operationsFS embed.FS

var opsQ = MustParseQueries(operationsFS, "operations.sql")

// RestoreEpoch starts a new history on a database a backup was just restored into (migration
// 0030, history_epoch_restore): a logical restore keeps the cluster's system identifier and
// timeline, so nothing else would tell the copy from its source, and both would hand out the
// same versions for different changes. It returns the first version of the new history.
func (d *DB) RestoreEpoch(ctx context.Context) (int64, error) {
	var first int64
	err := d.QueryRow(ctx, opsQ.Get("HistoryEpochRestore"), d.schema).Scan(&first)
	return first, err
}

// CheckLoginRoles runs what `strata project credentials` and `strata salt credentials` do to a
// role — create it and grant it CONNECT, give it a new password (a rotation), revoke its
// grants and drop it (a project deleted) — on a
// throwaway role named name, in a transaction that is rolled back, so nothing is left. A
// privilege attribute (CREATEROLE) says too little: PostgreSQL 15 refused the rotation to a
// CREATEROLE role, and PostgreSQL 16 adds rules of its own. The error names the step and
// PostgreSQL's own message.
func (d *DB) CheckLoginRoles(ctx context.Context, name string) error {
	apply := func(tx *Tx) error {
		_, err := tx.Exec(ctx, opsQ.Get("LoginRoleApply"), name, SCRAMVerifier(RandomPassword()))
		return err
	}
	steps := []struct {
		what string
		run  func(tx *Tx) error
	}{
		{"creating a login role", apply},
		{"giving it a new password (a rotation)", apply},
		{"dropping it", func(tx *Tx) error {
			_, err := tx.Exec(ctx, opsQ.Get("LoginRoleDrop"), name)
			return err
		}},
	}
	err := d.InTx(ctx, func(tx *Tx) error {
		for _, s := range steps {
			if err := s.run(tx); err != nil {
				return fmt.Errorf("%s (%s) failed: %s", s.what, name, ServerMessage(err))
			}
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// errRollback ends a transaction whose effects are not wanted (a check).
var errRollback = errors.New("rolled back")

// ServerMessage is what PostgreSQL said about a failed statement — its message, its SQLSTATE,
// and its detail and hint when it gave them — for errors that an operator acts on (a
// privilege the role lacks): "permission denied to alter role (SQLSTATE 42501): Only roles
// with …". The statement's context (which may quote a password verifier) is left out. An
// error that is not the server's is returned as it reads.
func ServerMessage(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	if pgErr.Detail != "" {
		b.WriteString(": " + pgErr.Detail)
	}
	if pgErr.Hint != "" {
		b.WriteString(" (hint: " + pgErr.Hint + ")")
	}
	return b.String()
}

// LoginRoleFault is the answer to a login-role operation (`strata project credentials`,
// `strata salt credentials`) that PostgreSQL refused for want of a privilege: a 403 that names
// the role and says what PostgreSQL refused, in its own words and SQLSTATE, and what strata's
// role needs. A guess ("it needs CREATEROLE") misled an operator whose role had it (issue 28).
// Other errors pass unchanged.
func LoginRoleFault(role string, err error) error {
	if !errors.Is(err, ErrPermission) {
		return err
	}
	return fault.Wrap(fault.KindForbidden, err, "strata's database role could not create or update the login role %q: PostgreSQL refused: %s. "+
		"strata's role needs the CREATEROLE attribute, and on PostgreSQL 16 and later ADMIN OPTION on a login role it did not create itself (see docs/operations.md, least-privilege credentials)", role, ServerMessage(err))
}
