package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cmd/internal/tier"
	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/internal/config"
)

func newDevCmd() *cobra.Command {
	var (
		dataDir   string
		host      string
		httpPort  int
		grpcPort  int
		regions   []string
		agents    int
		provs     []string
		tls       bool
		logLevel  string
		logFormat string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole cluster in one process on embedded defaults",
		Long: `Run a whole Strata cluster in one process: an embedded etcd for the
global tier and for each region (each on a unix socket of mode 0600 in
--data-dir, with etcd authentication on: no TCP port), in-memory
heartbeats and events, a dev CA for mutual TLS between tiers, one global
replica, and regions (dev-1, dev-2) with two agents each. With
--providers auto (the default) the agents run containers on containerd
and load balancers on HAProxy, and VMs on libvirt, where this machine has
them (as root), and the fake provider for the rest; one line says which.
Images may name the files of .cache/images (container archives) and
.cache/vm (VM kernels and disks) of the directory it runs in, by a path
relative to them (busybox-oci.tar): make dev runs it at the repository's
root.

It prints the URLs and the admin token, and stops cleanly on Ctrl-C. Its
data stays in --data-dir, so running it again resumes where it stopped.`,
		Example: `  strata dev --data-dir .dev
  strata dev --regions dev-1 --agents 4 --http-port 18080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logCfg := config.Log{Level: logLevel, Format: logFormat}
			if err := logCfg.Validate(); err != nil {
				return err
			}
			log := processLogger(logCfg)
			pcs := devProviders(provs, cmd.ErrOrStderr())
			abs, err := filepath.Abs(dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "starting the dev cluster in %s ...\n", abs)
			c, err := devcluster.Start(cmd.Context(), devcluster.Options{
				DataDir:         abs,
				Host:            host,
				HTTPPort:        httpPort,
				GRPCPort:        grpcPort,
				Regions:         regions,
				AgentsPerRegion: agents,
				Providers:       pcs,
				Registry:        tier.Providers(),
				TLS:             tls,
				Logger:          log,
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.Summary())
			fmt.Fprintln(cmd.OutOrStdout(), "Press Ctrl-C to stop.")
			err = c.Wait()
			fmt.Fprintln(cmd.ErrOrStderr(), "dev cluster stopped; its data is kept in", abs)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", defaultDevDir(), "where the cluster keeps its data")
	f.StringVar(&host, "host", "127.0.0.1", "address every tier binds to")
	f.IntVar(&httpPort, "http-port", 8080, "global REST port; region i serves on http-port+i")
	f.IntVar(&grpcPort, "grpc-port", 9090, "global gRPC port; region i serves on grpc-port+i")
	f.StringSliceVar(&regions, "regions", []string{"dev-1", "dev-2"}, "regions to run")
	f.IntVar(&agents, "agents", 2, "agents per region")
	f.StringSliceVar(&provs, "providers", []string{"auto"}, "providers every agent runs: auto (containerd and haproxy when this machine has them, libvirt when its plugin and libvirtd are there, then fake), or a list of fake, containerd, haproxy, libvirt")
	f.BoolVar(&tls, "tls", true, "mutual TLS between tiers with a generated dev CA (--tls=false: insecure mode, plaintext gRPC on loopback only)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

// devProviders turns --providers into agent provider configurations. In
// "auto", real providers come first where the machine has them (as root,
// with containerd, haproxy, libvirtd running), so that each kind goes to
// the real thing; the fake provider serves whatever is left. One line says
// which providers run and why each real one that does not is missing.
func devProviders(names []string, w io.Writer) []config.Provider {
	if len(names) == 1 && names[0] == "auto" {
		var missing []string
		names, missing = detectProviders(os.Geteuid() == 0, libvirtPlugin(), exec.LookPath, os.Stat)
		line := "providers: " + strings.Join(names, ", ")
		if len(missing) > 0 {
			line += " (the fake provider serves what these would: " + strings.Join(missing, "; ") + ")"
		}
		fmt.Fprintln(w, line)
	}
	var out []config.Provider
	for _, n := range names {
		n = strings.TrimSpace(n)
		pc := config.Provider{Name: n}
		// Tenants of the dev cluster may name the images `make dev`
		// builds (deploy/dev/images.sh, vm-image.sh), from the directory
		// it runs in, and nothing else of the host.
		switch n {
		case "containerd":
			pc.Options = map[string]any{"imageDirs": []string{absDir(".cache/images")}}
		case "haproxy":
			pc.Options = map[string]any{"bindAddress": "127.0.0.1"}
		case "libvirt":
			pc.Plugin = libvirtPlugin()
			pc.Options = map[string]any{"imageDirs": []string{absDir(".cache/vm")}}
		}
		out = append(out, pc)
	}
	return out
}

func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// detectProviders picks the real providers this machine can run and
// explains each one it cannot.
func detectProviders(root bool, plugin string, lookPath func(string) (string, error), stat func(string) (os.FileInfo, error)) (names, missing []string) {
	has := func(path string) bool { _, err := stat(path); return err == nil }
	switch {
	case !root:
		missing = append(missing, "containerd: not root")
	case !has("/run/containerd/containerd.sock"):
		missing = append(missing, "containerd: not running (/run/containerd/containerd.sock)")
	default:
		names = append(names, "containerd")
	}
	if _, err := lookPath("haproxy"); err != nil {
		missing = append(missing, "haproxy: not installed")
	} else {
		names = append(names, "haproxy")
	}
	switch {
	case plugin == "":
		missing = append(missing, "libvirt: no strata-provider-libvirt next to strata (building it needs libvirt-dev)")
	case !root:
		missing = append(missing, "libvirt: not root")
	case !has("/var/run/libvirt/libvirt-sock"):
		missing = append(missing, "libvirt: libvirtd not running")
	default:
		names = append(names, "libvirt")
	}
	return append(names, "fake"), missing
}

// libvirtPlugin finds strata-provider-libvirt next to this binary.
func libvirtPlugin() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), "strata-provider-libvirt")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func defaultDevDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "strata", "dev")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "strata", "dev")
	}
	return ".strata-dev"
}
