package db

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stratahq/strata/internal/fault"
)

// TestLostConnectionIsUnavailable (issue 21): a connection lost in the middle of a statement,
// a pipeline or a COMMIT — what a failover does — is a 503, never a 500; lost in a COMMIT it
// also says the outcome is unknown. The driver's own errors are what pgx returns then
// (seen in TestFailoverAnswers503AndLosesNothing: "write and stamp: unexpected EOF").
func TestLostConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{io.ErrUnexpectedEOF, fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), io.EOF, pgconn.ErrConnClosed} {
		err := interpretError(cause)
		require.ErrorIs(t, err, ErrUnavailable, "%v", cause)
		f := Fault(fmt.Errorf("write and stamp: %w", err))
		require.Equal(t, fault.KindUnavailable, fault.KindOf(f), "%v", cause)
		var fe *fault.Error
		require.True(t, errors.As(f, &fe))
		require.Nil(t, fe.Extensions["outcome"], "a statement's lost connection rolled its transaction back")

		f = Fault(commitError(cause))
		require.True(t, errors.As(f, &fe))
		require.Equal(t, fault.KindUnavailable, fe.Kind)
		require.Equal(t, "unknown", fe.Extensions["outcome"], "a COMMIT whose answer was lost may have been applied")
		require.Contains(t, fe.Detail, "may or may not have been applied")
	}
	// An error the server sent (it answered: the outcome is known) is not marked.
	err := commitError(&pgconn.PgError{Code: "40001"})
	var de *Error
	require.True(t, errors.As(err, &de))
	require.False(t, de.OutcomeUnknown)
}
