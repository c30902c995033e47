package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/stratahq/strata/internal/fault"
)

// Error categories. Every error that leaves this package wraps one of them (or is a plain
// context error), so callers decide with errors.Is and never look at SQLSTATEs.
var (
	// ErrNotFound is returned by Row.Scan when the query returned no row.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint refused the write: the thing exists already, or a
	// concurrent writer got there first. Error.Constraint names the constraint.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the database refused a value: a check or foreign-key constraint, a
	// value out of range, text that is not valid for its type.
	ErrInvalid = errors.New("invalid value")
	// ErrLockNotAvailable means a lock could not be taken without waiting (NOWAIT, or a
	// lock_timeout), or a serialization failure or deadlock made PostgreSQL abort the
	// transaction; the operation may be retried.
	ErrLockNotAvailable = errors.New("lock not available")
	// ErrUnavailable means the database could not be reached or is shutting down.
	ErrUnavailable = errors.New("database unavailable")
	// ErrPermission means the database role lacks a privilege.
	ErrPermission = errors.New("insufficient privilege")
	// ErrReadOnly means the database refuses writes: default_transaction_read_only, a hot
	// standby, or a transaction_read_only session. Reads still work.
	ErrReadOnly = errors.New("database is read-only")
	// ErrStale means a statement found that what its writer read outside the row lock has
	// changed since (SQLSTATE ST409, raised by unchanged_since_read, migration 0037): the
	// transaction rolled back, and the writer runs the write again from a read under the lock.
	// It never reaches a client.
	ErrStale = errors.New("read is stale")
)

// codeStale is the SQLSTATE of unchanged_since_read's error.
const codeStale = "ST409"

// Error carries the category, the constraint it came from when there is one, and the
// driver's own error (for logs, never for clients).
type Error struct {
	Kind       error
	Constraint string
	Code       string
	Err        error
	// OutcomeUnknown: the connection was lost while a COMMIT (or an implicitly committed
	// pipeline) was on its way, so the write may or may not have been applied.
	OutcomeUnknown bool
}

func (e *Error) Error() string {
	if e.Constraint != "" {
		return fmt.Sprintf("%v (%s): %v", e.Kind, e.Constraint, e.Err)
	}
	return fmt.Sprintf("%v: %v", e.Kind, e.Err)
}

// Unwrap lets errors.Is match both the category and the cause.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// ConstraintOf returns the name of the constraint behind err, or "".
func ConstraintOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Constraint
	}
	return ""
}

// lastDiskFull is when any query of this process last failed because the database's disk was
// full (unix nanoseconds; 0 never): readiness then probes with a write (ProbeWrite).
var lastDiskFull atomic.Int64

// DiskFullSince reports when a query last failed for want of disk, or the zero time.
func DiskFullSince() time.Time {
	if n := lastDiskFull.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// epochCheckAbsent reports an error of the history epoch check that leaves nothing to check:
// the schema or its migration 0024 is not there yet (a database being migrated), or the
// database is read-only (it takes no writes, so no version of a new history can be drawn), or
// the role may not read strata's tables (Salt's node_pillars role: it draws no versions).
func epochCheckAbsent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case pgerrcode.UndefinedFunction, pgerrcode.InvalidSchemaName, pgerrcode.UndefinedTable, pgerrcode.ReadOnlySQLTransaction, pgerrcode.InsufficientPrivilege:
		return true
	}
	return false
}

// commitError interprets the error of a COMMIT (or of a pipeline PostgreSQL commits by
// itself): a lost connection there leaves the outcome unknown, which the answer must say.
// So does a server that answers the COMMIT by terminating the session (admin_shutdown,
// crash_shutdown): a backend terminated while it waits for a synchronous standby has
// already committed locally ("the transaction has already committed locally" comes before
// the FATAL), and one terminated a moment earlier has not — the client cannot tell which.
// Other errors the server sends at COMMIT (disk full, out of connections) roll back.
func commitError(err error) error {
	err = interpretError(err)
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrUnavailable && (e.Code == "" || sessionEndedAtCommit(e.Code)) {
		e.OutcomeUnknown = true
	}
	return err
}

// sessionEndedAtCommit reports whether a SQLSTATE received in answer to a COMMIT ends the
// session with the commit's fate unknown.
func sessionEndedAtCommit(code string) bool {
	return code == pgerrcode.AdminShutdown || code == pgerrcode.CrashShutdown
}

// interpretError is the one place driver errors become strata's.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &Error{Kind: ErrNotFound, Err: err}
	}
	if errorsIsAny(err, context.Canceled, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return &Error{Kind: ErrUnavailable, Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		kind := classify(pgErr.Code)
		if kind == nil {
			return err
		}
		if pgErr.Code == pgerrcode.DiskFull {
			lastDiskFull.Store(time.Now().UnixNano())
		}
		return &Error{Kind: kind, Constraint: pgErr.ConstraintName, Code: pgErr.Code, Err: err}
	}
	// A connection lost in the middle of a statement, a pipeline or a COMMIT (a failover, the
	// server killed): the driver reports an unexpected EOF or a closed connection. The
	// database is unavailable, not the request wrong (issue 21: these were 500s).
	if errorsIsAny(err, io.ErrUnexpectedEOF, io.EOF, pgconn.ErrConnClosed) || pgconn.Timeout(err) {
		return &Error{Kind: ErrUnavailable, Err: err}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.SafeToRetry(err) {
		return &Error{Kind: ErrUnavailable, Err: err}
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return &Error{Kind: ErrUnavailable, Err: err}
	}
	return err
}

func classify(code string) error {
	switch code {
	case pgerrcode.UniqueViolation, pgerrcode.ExclusionViolation:
		return ErrConflict
	case pgerrcode.CheckViolation, pgerrcode.ForeignKeyViolation, pgerrcode.NotNullViolation,
		pgerrcode.InvalidTextRepresentation, pgerrcode.NumericValueOutOfRange,
		pgerrcode.StringDataRightTruncationDataException, pgerrcode.InvalidParameterValue,
		pgerrcode.UntranslatableCharacter, pgerrcode.CharacterNotInRepertoire,
		pgerrcode.InvalidDatetimeFormat, pgerrcode.DatetimeFieldOverflow:
		return ErrInvalid
	case pgerrcode.LockNotAvailable, pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected:
		return ErrLockNotAvailable
	case pgerrcode.InsufficientPrivilege:
		return ErrPermission
	case pgerrcode.ReadOnlySQLTransaction:
		return ErrReadOnly
	case codeStale:
		return ErrStale
	case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow,
		pgerrcode.TooManyConnections, pgerrcode.ConnectionException, pgerrcode.ConnectionFailure,
		pgerrcode.DiskFull, pgerrcode.InsufficientResources, pgerrcode.OutOfMemory,
		pgerrcode.ConfigurationLimitExceeded:
		return ErrUnavailable
	}
	return nil
}

// reason is the 503 reason of an unavailable or read-only database error.
func (e *Error) reason() string {
	switch {
	case e.Kind == ErrReadOnly:
		return fault.ReasonReadOnly
	case e.Code == pgerrcode.DiskFull:
		return fault.ReasonDiskFull
	case e.Code == pgerrcode.TooManyConnections || e.Code == pgerrcode.ConfigurationLimitExceeded:
		return fault.ReasonConnections
	}
	return fault.ReasonUnavailable
}

// Fault is the fault an error of this package stands for (see the package function Fault),
// nil when it depends on the operation (not found, conflict, permission).
func (e *Error) Fault() *fault.Error {
	switch {
	case e.Kind == ErrInvalid:
		return &fault.Error{Kind: fault.KindInvalid, Detail: "the database refused a value in the request (out of range or not representable)", Err: e}
	case e.Kind == ErrReadOnly:
		return fault.Unavailable(fault.ReasonReadOnly, e, "the database is read-only (a standby, or default_transaction_read_only); writes are refused until it accepts them again, reads still work")
	case e.Kind == ErrUnavailable && e.OutcomeUnknown:
		f := fault.Unavailable(fault.ReasonUnavailable, e, "the connection to the database was lost while this write was being committed: it may or may not have been applied. Read it again (compare its resourceVersion, or a Terraform state's serial) before you retry")
		f.Extensions = map[string]any{"outcome": "unknown"}
		return f
	case e.Kind == ErrUnavailable:
		switch r := e.reason(); r {
		case fault.ReasonDiskFull:
			return fault.Unavailable(r, e, "the database's disk is full; writes are refused until space is freed")
		case fault.ReasonConnections:
			return fault.Unavailable(r, e, "the database has no connection to spare; try again")
		default:
			return fault.Unavailable(r, e, "the database is not reachable; try again")
		}
	case e.Kind == ErrLockNotAvailable:
		return fault.Unavailable(fault.ReasonUnavailable, e, "the database could not complete the request because of concurrent activity; try again")
	case e.Kind == ErrStale:
		// Writers run again on ErrStale; one that reaches a request means the object kept
		// changing under it, which the client resolves like any conflict.
		return &fault.Error{Kind: fault.KindConflict, Detail: "the object changed while this write was being made; read it again and retry", Err: e}
	}
	return nil
}

// Fault is the one mapping from this package's error kinds to the fault categories the HTTP
// layer answers with; capability packages and httpapi both use it, so a database error means
// the same status wherever it surfaces. A fault error passes unchanged, as does an error
// that is not the database's (the caller decides; httpapi makes it a logged 500).
//
//   - ErrInvalid: KindInvalid (a value only the database could judge; still the client's input)
//   - ErrReadOnly: KindUnavailable, reason read-only (a standby, default_transaction_read_only)
//   - ErrUnavailable: KindUnavailable, reason disk-full, connections or unavailable
//   - ErrLockNotAvailable: KindUnavailable (lock_timeout, serialization failure, deadlock: retry)
//   - context.DeadlineExceeded / context.Canceled: KindUnavailable (timed out / cancelled)
//
// ErrNotFound, ErrConflict and ErrPermission stay as they are: what they mean depends on the
// operation, which the capability package knows and this mapping does not.
func Fault(err error) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	var de *Error
	if errors.As(err, &de) {
		if f := de.Fault(); f != nil {
			f.Err = err
			return f
		}
	}
	switch {
	case errors.Is(err, ErrUnavailable):
		return fault.Unavailable(fault.ReasonUnavailable, err, "the database is not reachable; try again")
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Wrap(fault.KindUnavailable, err, "the request timed out")
	case errors.Is(err, context.Canceled):
		return fault.Wrap(fault.KindUnavailable, err, "the request was cancelled")
	}
	return err
}

// Translate is interpretError for the packages under internal/db that talk to pgx themselves
// (dbadmin): one translation of driver errors for all of them.
func Translate(err error) error { return interpretError(err) }
