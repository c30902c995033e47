package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is the one progress report of every long command. On a terminal it is a bar
// (schollz/progressbar, which knows terminals: widths, redraws, throttling); written to a
// pipe or a file it is a plain line of counts every few seconds, so logs stay readable; with
// -q it is nothing.
type progress struct {
	bar  *progressbar.ProgressBar // on a terminal
	w    io.Writer                // otherwise, the counts' writer (nil: quiet)
	what string
	max  int64
	last time.Time
	cur  int64
	done int64
}

// plainEvery is how often a progress report that is not on a terminal prints a line.
const plainEvery = 5 * time.Second

// newProgress reports on stderr the progress of max units (bytes or items; 0 when unknown)
// described by what ("lines applied").
func (g *globals) newProgress(max int64, what string, quiet bool) *progress {
	p := &progress{what: what, max: max, last: time.Now()}
	switch {
	case quiet:
	case isTerminal(g.stderr):
		if max <= 0 {
			max = -1 // a spinner
		}
		p.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(g.stderr),
			progressbar.OptionSetDescription(what),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	default:
		p.w = g.stderr
	}
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// set records the position (cur of max) and the count of items done.
func (p *progress) set(cur, done int64) {
	p.cur, p.done = cur, done
	switch {
	case p.bar != nil:
		if p.max > 0 {
			_ = p.bar.Set64(cur)
		} else {
			_ = p.bar.Set64(done)
		}
		p.bar.Describe(fmt.Sprintf("%d %s", done, p.what))
	case p.w != nil && time.Since(p.last) >= plainEvery:
		p.last = time.Now()
		p.line()
	}
}

func (p *progress) line() {
	if p.max > 0 {
		fmt.Fprintf(p.w, "%d %s (%d%%)\n", p.done, p.what, p.cur*100/p.max)
		return
	}
	fmt.Fprintf(p.w, "%d %s\n", p.done, p.what)
}

// finish ends the report: the bar is cleared (the command prints its summary); the plain
// report ends with the final counts.
func (p *progress) finish() {
	switch {
	case p.bar != nil:
		_ = p.bar.Finish()
	case p.w != nil:
		p.line()
	}
}
