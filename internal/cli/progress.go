package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress is the one progress report of every long command, fed by the work itself: items
// the server reported done (a bulk apply's per-line results, an import's per-row results),
// batches a loop finished, files read. It never counts bytes sent, which a buffered upload
// sends long before anything is applied.
//
// On a terminal it is a bar when the total is known, else a spinner, each with the counts and
// the elapsed time, redrawn in place; finish leaves its last frame on screen above the
// command's summary. Written to a pipe or a file it is a plain line of counts every few
// seconds (also while nothing arrives, so a slow step does not look hung) and a last line at
// the end; with -q it is nothing. Failures are counted apart ("2 lines applied, 3 failed"), so
// nothing is reported done before it is known to be.
type progress struct {
	mu     sync.Mutex
	tty    *os.File  // the terminal drawn on, or nil
	w      io.Writer // otherwise, the counts' writer (nil: quiet)
	what   string    // what done counts, e.g. "lines applied"
	label  bool      // what is the whole description: no counts (newSpinner)
	max    int64     // the total of cur, 0 when unknown
	cur    int64     // items handled (done, failed or skipped)
	done   int64     // items done
	failed int64     // items that failed
	start  time.Time
	frame  int
	width  int
	ended  bool
	shown  string // the terminal's current frame, not redrawn unchanged
	stop   chan struct{}
	wg     sync.WaitGroup
}

// plainEvery is how often a progress report that is not on a terminal prints a line.
const plainEvery = 5 * time.Second

// drawEvery is how often a terminal's bar or spinner is redrawn.
const drawEvery = 150 * time.Millisecond

// spinnerFrames animate the report of work whose total is not known.
var spinnerFrames = []string{"|", "/", "-", `\`}

// newProgress reports on stderr the progress of max items (0 when unknown) described by what
// ("lines applied").
func (g *globals) newProgress(max int64, what string, quiet bool) *progress {
	p := &progress{what: what, max: max, start: time.Now(), stop: make(chan struct{})}
	every := plainEvery
	switch {
	case quiet:
		return p
	case isTerminal(g.stderr):
		p.tty = g.stderr.(*os.File)
		p.width = 80
		if w, _, err := term.GetSize(int(p.tty.Fd())); err == nil && w > 20 {
			p.width = w
		}
		every = drawEvery
	default:
		p.w = g.stderr
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw(false)
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// set records the position (cur of max) and the count of items done.
func (p *progress) set(cur, done int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.done = cur, done
}

// setMax records the total once it is known (or changes).
func (p *progress) setMax(max int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.max = max
}

// result counts one item the work reported: done, or failed.
func (p *progress) result(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur++
	if ok {
		p.done++
	} else {
		p.failed++
	}
}

// newSpinner reports work that has no count, one request the server works on for a while
// (e.g. "converting 12 rows and their history"): a spinner with the elapsed time.
func (g *globals) newSpinner(what string, quiet bool) *progress {
	p := g.newProgress(0, what, quiet)
	p.mu.Lock()
	p.label = true
	p.mu.Unlock()
	return p
}

// counts is the report's words: "1200 lines applied, 3 failed".
func (p *progress) counts() string {
	if p.label {
		return p.what
	}
	s := fmt.Sprintf("%d %s", p.done, p.what)
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.failed)
	}
	return s
}

// draw writes one report: a frame redrawn in place on a terminal (final: left on screen,
// with a newline), a line otherwise. The caller holds p.mu.
func (p *progress) draw(final bool) {
	if p.ended {
		return
	}
	elapsed := time.Since(p.start).Round(time.Second)
	switch {
	case p.tty != nil:
		var line string
		if p.max > 0 {
			const barWidth = 30
			cur := min(p.cur, p.max)
			fill := int(cur * barWidth / p.max)
			line = fmt.Sprintf("[%s%s] %3d%% %d/%d %s %s", strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill),
				cur*100/p.max, cur, p.max, p.counts(), elapsed)
		} else {
			spin := spinnerFrames[p.frame%len(spinnerFrames)]
			if final {
				spin = "-"
			}
			p.frame++
			line = fmt.Sprintf("%s %s %s", spin, p.counts(), elapsed)
		}
		if r := []rune(line); len(r) > p.width-1 {
			line = string(r[:p.width-1]) // a wrapped line would not be redrawn in place
		}
		switch {
		case final:
			fmt.Fprintf(p.tty, "\r\x1b[K%s\n", line)
		case line != p.shown:
			fmt.Fprintf(p.tty, "\r\x1b[K%s", line)
		}
		p.shown = line
	case p.w != nil:
		if p.max > 0 {
			fmt.Fprintf(p.w, "%s (%d of %d, %d%%, %s)\n", p.counts(), p.cur, p.max, min(p.cur, p.max)*100/p.max, elapsed)
			return
		}
		fmt.Fprintf(p.w, "%s (%s)\n", p.counts(), elapsed)
	}
}

// finish ends the report: a terminal keeps the last frame, a pipe gets the final counts.
func (p *progress) finish() { p.close(true) }

// abandon ends the report of work that failed as a whole (a restore that stopped, a batch
// loop that got an error): a terminal's frame is cleared and a pipe gets no last line, so no
// count is announced for work that the error which follows says did not complete.
func (p *progress) abandon() { p.close(false) }

// end finishes the report when err is nil, else abandons it.
func (p *progress) end(err error) { p.close(err == nil) }

func (p *progress) close(keep bool) {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	if keep {
		p.draw(true)
	} else if p.tty != nil && p.shown != "" {
		fmt.Fprint(p.tty, "\r\x1b[K")
	}
	p.ended = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
}
