package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadAnswers (issue 28, item 7): every answer the load's operations should not get is
// counted bad — not only 500s and transport errors. A fault is a 503 with Retry-After; a 502,
// a 504, a 503 without Retry-After, or a 4xx a valid request should never get (a 404 for a
// node that exists, a 400) is a wrong answer too.
func TestBadAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind, status string
		bad          bool
	}{
		{"patch", "200", false},
		{"patch", "503", false},
		{"patch", "503-no-retry-after", true},
		{"patch", "500", true},
		{"patch", "0", true},
		{"patch", "502", true},
		{"patch", "504", true},
		{"patch", "404", true},
		{"patch", "400", true},
		{"patch", "409", true},
		{"lock", "200", false},
		{"lock", "423", false},
		{"lock", "503", false},
		{"lock", "409", true},
		{"state", "200", false},
		{"state", "503", false},
		{"state", "423", true},
		{"unlock", "200", false},
		{"unlock", "409", false},
		{"unlock", "503", false},
		{"unlock", "404", true},
		{"render", "200", false},
		{"render", "503", false},
		{"render", "404", true},
		{"render", "504", true},
	} {
		require.Equal(t, c.bad, badAnswer(c.kind, c.status), "%s %s", c.kind, c.status)
	}
}
