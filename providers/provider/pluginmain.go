package provider

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratahq/strata/internal/hostpolicy"
)

// PluginMain is the whole main function of a provider plugin binary:
//
//	func main() { provider.PluginMain("libvirt", libvirt.Factory) }
//
// It parses the flags StartPlugin passes (--socket, --options, --node,
// --data-dir, --reserved-ports, and --name, which defaults to name),
// builds the provider with factory, and serves it until SIGINT or
// SIGTERM. It logs to stderr, which the supervising agent forwards to its
// own log, and exits 1 on failure.
func PluginMain(name string, factory Factory) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runPlugin(ctx, name, factory, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

// runPlugin is PluginMain without the process: it reports failures on
// stderr and returns them.
func runPlugin(ctx context.Context, name string, factory Factory, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "unix socket to serve on (required)")
	options := fs.String("options", "", "the provider's settings, as a JSON object")
	node := fs.String("node", "", "the agent's node name")
	dataDir := fs.String("data-dir", "", "a directory private to this provider")
	cfgName := fs.String("name", name, "the provider's configured name")
	reserved := fs.String("reserved-ports", "", "the node's own service ports, never given to tenants (30000-32767,9092)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ports, err := hostpolicy.ParsePorts(*reserved)
	if err != nil {
		fmt.Fprintf(stderr, "--reserved-ports: %v\n", err)
		return fmt.Errorf("--reserved-ports: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("provider", *cfgName)
	err = servePlugin(ctx, factory, fs.Args(), Options{
		Name:          *cfgName,
		Node:          *node,
		DataDir:       *dataDir,
		Logger:        log,
		ReservedPorts: ports,
	}, *socket, *options)
	if err != nil {
		log.Error("plugin failed", "err", err)
	}
	return err
}

func servePlugin(ctx context.Context, factory Factory, extra []string, o Options, socket, options string) error {
	if len(extra) > 0 {
		return fmt.Errorf("unexpected arguments %q", extra)
	}
	if socket == "" {
		return errors.New("--socket is required")
	}
	if options != "" {
		if err := json.Unmarshal([]byte(options), &o.Config); err != nil {
			return fmt.Errorf("--options: %w", err)
		}
	}
	p, err := factory(ctx, o)
	if err != nil {
		return fmt.Errorf("new provider: %w", err)
	}
	if c, ok := p.(Closer); ok {
		defer func() {
			if err := c.Close(); err != nil {
				o.Logger.Warn("close provider", "err", err)
			}
		}()
	}
	return Serve(ctx, p, socket, o.Logger)
}
