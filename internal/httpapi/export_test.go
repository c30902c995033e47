package httpapi

// BulkPeak is the most input (in budget units, see lineCost) any bulk apply served by a has
// held at once.
func (a *API) BulkPeak() int64 { return a.bulkPeak.Load() }

// BulkInputPeak is the most bytes of lines (their raw length, not their lineCost) any bulk
// apply served by a has held at once.
func (a *API) BulkInputPeak() int64 { return a.bulkInputPeak.Load() }
