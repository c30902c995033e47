package httpapi

import "time"

// BulkPeak is the most input (in budget units, see lineCost) any bulk apply served by a has
// held at once.
func (a *API) BulkPeak() int64 { return a.bulkPeak.Load() }

// BulkInputPeak is the most bytes of lines (their raw length, not their lineCost) any bulk
// apply served by a has held at once.
func (a *API) BulkInputPeak() int64 { return a.bulkInputPeak.Load() }

// SetWatchJitter makes f draw the random part of the lifetime of the streams a serves from
// now on; call it before a serves any.
func (a *API) SetWatchJitter(f func(d time.Duration) time.Duration) { a.watchJitter = f }

// WatchLifetime draws the lifetime of a new stream as a does.
func (a *API) WatchLifetime() time.Duration { return a.watchLifetime() }
