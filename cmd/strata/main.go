// Command strata is the strata server and its command-line client in one binary: "strata
// serve" runs the API server, "strata migrate" manages the database schema, and every other
// command is a client of the API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratahq/strata/internal/cli"
	"github.com/stratahq/strata/internal/server"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	reloads := server.NewReloader()
	sigs := make(chan os.Signal, 4)
	// Every signal whose default action would end the process is handled, so none ends it
	// without the shutdown that stops the embedded PostgreSQL (which would otherwise be
	// orphaned). Later signals during the shutdown are absorbed for the same reason; only
	// SIGKILL cannot be, and the next start cleans up after it.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range sigs {
			switch sig {
			case syscall.SIGHUP:
				// `systemctl reload strata`: a running server re-reads its TLS pair and key
				// files and never exits; any other command (no server runs) stops cleanly.
				if !reloads.Request() {
					cancel()
				}
			case syscall.SIGUSR1, syscall.SIGUSR2:
				fmt.Fprintf(os.Stderr, "strata: ignoring signal %v\n", sig)
			default:
				cancel()
			}
		}
	}()
	code := cli.Main(server.WithReloader(ctx, reloads), os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}
