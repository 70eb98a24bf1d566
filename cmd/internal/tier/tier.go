// Package tier is what the binaries share of running a tier: a tier's
// command (--config, flags that set configuration keys), the agent's
// command and the providers built into it, the version command, and the
// process's main (signals, exit status, STRATA_PPROF). `strata agent` and
// `strata-agent` are the same command built here once.
package tier

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/version"
)

// Flag is a command-line flag that sets a configuration key.
type Flag struct {
	Name, Key, Usage string
	List             bool // a comma-separated list
}

// LogLevelFlag is --log-level, which every tier has.
var LogLevelFlag = Flag{Name: "log-level", Key: "log.level", Usage: "debug, info, warn or error"}

// Runner is a tier built from its configuration.
type Runner interface {
	Run(ctx context.Context) error
}

// Command completes cmd into a tier's command: --config and flags, and a
// run that loads cfg (its defaults, then the file, the environment and
// the flags the user set), builds the tier and runs it until the
// command's context ends.
func Command[C config.Config](cmd *cobra.Command, cfg C, flags []Flag, build func(C) (Runner, error)) *cobra.Command {
	var file string
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "YAML configuration file")
	keys := map[string]string{}
	for _, tf := range flags {
		if tf.List {
			f.StringSlice(tf.Name, nil, tf.Usage)
		} else {
			f.String(tf.Name, "", tf.Usage)
		}
		keys[tf.Name] = tf.Key
	}
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := config.Load(cfg, config.Source{File: file, Flags: cmd.Flags(), FlagKeys: keys}); err != nil {
			return err
		}
		r, err := build(cfg)
		if err != nil {
			return err
		}
		return r.Run(cmd.Context())
	}
	return cmd
}

// NewVersionCmd prints the version of the binary name.
func NewVersionCmd(name string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), name, version.String())
		},
	}
}

// Main runs root until SIGINT or SIGTERM and exits 1 on an error (printed
// with name, unless it is the signal's cancellation).
// STRATA_PPROF=127.0.0.1:6060 serves Go's profiler (benchmarks take
// their profiles this way).
func Main(name string, root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if addr := os.Getenv("STRATA_PPROF"); addr != "" {
		go servePprof(name, addr)
	}
	if err := root.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		stop()
		os.Exit(1)
	}
}

func servePprof(name, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Fprintln(os.Stderr, name+": pprof:", http.ListenAndServe(addr, mux))
}
