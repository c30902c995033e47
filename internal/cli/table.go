package cli

import (
	"io"
	"strings"
	"text/tabwriter"
)

type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cols ...string) {
	_, _ = io.WriteString(t.tw, strings.Join(cols, "\t")+"\n")
}

func (t *table) flush() error { return t.tw.Flush() }
