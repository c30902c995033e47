package robustness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

var red = map[string]string{"color": "red"}
var blue = map[string]string{"color": "blue"}

// filterLog is an org's life in and out of a selection: created blue (not sent), relabelled
// red (ADDED), changed while red (MODIFIED), relabelled blue (DELETED, carrying the blue
// object), changed while blue (not sent), red again, then deleted (DELETED).
var filterLog = []Change{
	{RV: 3, Kind: "Org", Name: "a", Type: "ADDED", Marker: "m1", Labels: blue},
	{RV: 4, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m2", Labels: red},
	{RV: 5, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m3", Labels: red},
	{RV: 6, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m4", Labels: blue},
	{RV: 7, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m5", Labels: blue},
	{RV: 8, Kind: "Org", Name: "b", Type: "ADDED", Marker: "m6", Labels: red},
	{RV: 9, Kind: "Org", Name: "a", Type: "MODIFIED", Marker: "m7", Labels: red},
	{RV: 10, Kind: "Org", Name: "a", Type: "DELETED", Marker: "m7", Labels: red},
	{RV: 11, Kind: "Org", Name: "c", Type: "ADDED", Marker: "m8", Labels: blue},
	{RV: 12, Kind: "Org", Name: "c", Type: "DELETED", Marker: "m8", Labels: blue},
}

func TestFilterChangesSelector(t *testing.T) {
	t.Parallel()
	got := FilterChanges(filterLog, red, "")
	var short []string
	for _, c := range got {
		short = append(short, c.Type+" "+c.Name+" "+c.Marker)
	}
	require.Equal(t, []string{"ADDED a m2", "MODIFIED a m3", "DELETED a m4", "ADDED b m6", "ADDED a m7", "DELETED a m7"}, short)
	// Without a filter the log is what a watch sends.
	require.Equal(t, filterLog, FilterChanges(filterLog, nil, ""))
}

func TestFilterChangesOrg(t *testing.T) {
	t.Parallel()
	log := []Change{
		{RV: 3, Kind: "Node", Name: "n1", Type: "ADDED", Marker: "m1", SpecOrg: "o1"},
		{RV: 4, Kind: "Node", Name: "n2", Type: "ADDED", Marker: "m2", SpecOrg: "o2"},
		{RV: 5, Kind: "Node", Name: "n1", Type: "MODIFIED", Marker: "m3", SpecOrg: "o2"}, // moves out: DELETED
		{RV: 6, Kind: "Node", Name: "n2", Type: "MODIFIED", Marker: "m4", SpecOrg: "o1"}, // moves in: ADDED
		{RV: 7, Kind: "Node", Name: "n1", Type: "MODIFIED", Marker: "m5", SpecOrg: "o2"}, // elsewhere: not sent
		{RV: 8, Kind: "Node", Name: "n2", Type: "MODIFIED", Marker: "m6", SpecOrg: "o1", Labels: red},
		{RV: 9, Kind: "Node", Name: "n1", Type: "DELETED", Marker: "m5", SpecOrg: "o2"}, // elsewhere: not sent
	}
	var short []string
	for _, c := range FilterChanges(log, nil, "o1") {
		short = append(short, c.Type+" "+c.Name+" "+c.Marker)
	}
	require.Equal(t, []string{"ADDED n1 m1", "DELETED n1 m3", "ADDED n2 m4", "MODIFIED n2 m6"}, short)
	// Both filters: a node must meet both.
	short = nil
	for _, c := range FilterChanges(log, red, "o1") {
		short = append(short, c.Type+" "+c.Name+" "+c.Marker)
	}
	require.Equal(t, []string{"ADDED n2 m6"}, short)
}

func selStream(segs ...WatchSegment) WatchStream {
	return WatchStream{Name: "w-red", Kind: "Org", Selector: red, Segments: segs}
}

func TestFilteredWatchLegal(t *testing.T) {
	t.Parallel()
	truth := Truth{Changes: filterLog, CompactedThrough: 1}
	s := selStream(
		WatchSegment{From: 3, Events: []WatchEvent{ev("ADDED", "a", 4, "m2"), ev("MODIFIED", "a", 5, "m3"), {Type: "BOOKMARK", RV: 5}}, End: "eof"},
		WatchSegment{From: 5, Events: []WatchEvent{ev("DELETED", "a", 6, "m4"), ev("ADDED", "b", 8, "m6"), ev("ADDED", "a", 9, "m7"), ev("DELETED", "a", 10, "m7"), {Type: "BOOKMARK", RV: 12}}},
	)
	require.Empty(t, CheckWatches([]WatchStream{s}, truth))
}

func TestFilteredWatchViolations(t *testing.T) {
	t.Parallel()
	truth := Truth{Changes: filterLog, CompactedThrough: 1}
	for name, c := range map[string]struct {
		s     WatchStream
		check string
	}{
		// The change that took a out of the selection never arrived, though a bookmark
		// after it did: a consumer keeps a forever.
		"relabel out dropped": {selStream(WatchSegment{From: 3, Events: []WatchEvent{ev("ADDED", "a", 4, "m2"), ev("MODIFIED", "a", 5, "m3"), {Type: "BOOKMARK", RV: 7}}}), "watch-reliable"},
		// Relabelled out but sent as MODIFIED: the consumer thinks it still matches.
		"relabel out as MODIFIED": {selStream(WatchSegment{From: 5, Events: []WatchEvent{ev("MODIFIED", "a", 6, "m4")}}), "watch-content"},
		// Relabelled in but sent as MODIFIED.
		"relabel in as MODIFIED": {selStream(WatchSegment{From: 3, Events: []WatchEvent{ev("MODIFIED", "a", 4, "m2")}}), "watch-content"},
		// A change of an object outside the selection before and after was sent.
		"non-matching change sent": {selStream(WatchSegment{From: 6, Events: []WatchEvent{ev("MODIFIED", "a", 7, "m5")}}), "watch-reliable"},
		// The deletion of a non-matching object was sent.
		"non-matching delete sent": {selStream(WatchSegment{From: 10, Events: []WatchEvent{ev("DELETED", "c", 12, "m8")}}), "watch-reliable"},
	} {
		vs := CheckWatches([]WatchStream{c.s}, truth)
		found := false
		for _, v := range vs {
			found = found || v.Check == c.check
		}
		require.True(t, found, "%s: want %s, got %v", name, c.check, vs)
	}
}
