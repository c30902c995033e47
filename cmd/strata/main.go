// Command strata is the strata server and its command-line client in one binary: "strata
// serve" runs the API server, "strata migrate" manages the database schema, and every other
// command is a client of the API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratahq/strata/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
