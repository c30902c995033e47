// Command recheck checks kept robustness histories again: every check that needs only the
// files a run keeps (docs/robustness.md, "A failing run"), with a timeout of its own.
// Use it after a fix to a checker, or when a check ran out of time:
//
//	go run ./internal/robustness/recheck -timeout 30m /tmp/strata-robustness-XXXX/003-pause-replica-2
//
// It exits with status 1 when a history has a violation (a timeout is one).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/stratahq/strata/internal/robustness"
)

func main() {
	timeout := flag.Duration("timeout", 5*time.Minute, "time each family's linearizability check may take")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: recheck [-timeout D] DIR...  (directories a robustness run kept)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	bad := false
	for _, dir := range flag.Args() {
		r, err := robustness.ReadKept(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", dir, err)
			os.Exit(2)
		}
		start := time.Now()
		c := robustness.CheckRecorded(r, *timeout)
		fmt.Printf("%s: %d operations (%d resolved from the log, %d dropped, %d left forked) on %d keys; checked in %v; %d violations\n",
			dir, len(r.Ops), c.Resolved, c.Dropped, c.Linearizability.Unresolved, c.Linearizability.Keys,
			time.Since(start).Round(time.Millisecond), len(c.Violations))
		for _, v := range c.Violations {
			fmt.Println(v.String())
			bad = true
		}
	}
	if bad {
		os.Exit(1)
	}
}
