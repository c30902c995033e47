package db

import "context"

// DeleteInBatches runs q, a DELETE of at most batch rows whose last parameter is that limit,
// again and again until a run deletes fewer than batch rows, and returns how many rows went.
// Retention sweeps use it so that a large backlog is many short transactions, never one long
// one holding locks and bloating WAL at once.
func (d *DB) DeleteInBatches(ctx context.Context, q *Query, batch int, args ...any) (int64, error) {
	args = append(args, batch)
	var total int64
	for {
		n, err := d.Exec(ctx, q, args...)
		total += n
		if err != nil || n < int64(batch) || ctx.Err() != nil {
			return total, err
		}
	}
}
