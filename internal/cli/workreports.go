package cli

import (
	"context"
	"fmt"

	"github.com/stratahq/strata/client"
)

// importWithProgress runs a tree import with the server's NDJSON result stream, counting the
// rows its transaction writes. They are "staged", not imported: the import is one transaction
// and commits only when the summary arrives, so the report never claims rows a later failure
// rolled back; that failure says nothing was imported.
func importWithProgress(ctx context.Context, g *globals, c *client.Client, req client.PillarImportRequest, opts client.PillarImportOptions, quiet bool) (client.PillarImportReport, error) {
	prog := g.newProgress(0, "rows staged", quiet)
	staged := 0
	rep, err := c.PillarImportStream(ctx, req, opts, func(_ client.PillarImportRow, item, of int) {
		staged = item
		prog.setMax(int64(of))
		prog.result(true)
	})
	if err != nil && staged == 0 {
		prog.abandon() // refused before any row: no "0 rows staged" before the error
	} else {
		prog.finish() // the rows staged, then (on a failure) that none were imported
	}
	if err != nil && staged > 0 {
		return rep, fmt.Errorf("nothing was imported (the import is one transaction, rolled back): %w", err)
	}
	return rep, err
}

// applyStopped is the error of `strata apply` when document i (0-based) of n fails: the
// objects before it were applied (each printed as it was), it failed, and the rest were not
// tried, so the count of each is said rather than left to be inferred.
func applyStopped(err error, kind, name string, i, n int) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("%s/%s (document %d of %d): %w\n%d applied, 1 failed, %d not tried", kind, name, i+1, n, err, i, n-i-1)
}
