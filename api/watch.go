package api

// Event types of a watch stream.
const (
	EventAdded    = "ADDED"
	EventModified = "MODIFIED"
	EventDeleted  = "DELETED"
	// EventBookmark carries only Object.Kind and Object.Metadata.ResourceVersion: the stream
	// is complete through that version, and a watch resumed from it misses nothing.
	EventBookmark = "BOOKMARK"
)

// Event is one event of a watch. Object.Metadata.ResourceVersion is the version to resume
// from after it.
type Event struct {
	Type   string `json:"type"`
	Object Object `json:"object"`
}
