package httpapi

// BulkPeak is the most input (in budget units, see lineCost) any bulk apply served by a has
// held at once.
func (a *API) BulkPeak() int64 { return a.bulkPeak.Load() }
