// Command stratactl is the operator's CLI for Strata's global REST API; it
// lives in cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratahq/strata/cli"
)

func main() {
	// Ctrl-C cancels the context: watches and follows end cleanly, waits
	// say that the operation goes on without them.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Stdio())
	stop()
	os.Exit(code)
}
