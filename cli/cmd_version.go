package cli

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/version"
)

// versionTimeout bounds the server's answer: version must answer fast even
// when the server is away.
const versionTimeout = 5 * time.Second

type versionInfo struct {
	Client clientVersion  `json:"client"`
	Server *serverVersion `json:"server,omitempty"`
}

type clientVersion struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

type serverVersion struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	// Replica is the global API replica that answered.
	Replica string `json:"replica"`
	Leader  string `json:"leader,omitempty"`
}

func (a *App) versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version, and the server's when it is reachable",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := printers.ParseFormat(output)
			if err != nil {
				return &usageError{err: err}
			}
			info := versionInfo{Client: clientVersion{Version: version.String(), Go: runtime.Version()}}
			// The server is a bonus: not configured or not reachable, the
			// client's version is still the answer.
			var serverErr error
			if c, err := a.client(); err != nil {
				serverErr = err
			} else {
				ctx, cancel := context.WithTimeout(cmd.Context(), versionTimeout)
				st, err := c.Status(ctx)
				cancel()
				if err != nil {
					serverErr = err
				} else {
					info.Server = &serverVersion{Version: st.Version, URL: c.URL(), Replica: st.ID, Leader: st.Leader}
				}
			}
			if format.Structured() {
				return printers.Write(a.io.Out, format, info)
			}
			fmt.Fprintf(a.io.Out, "Client: stratactl %s (%s)\n", info.Client.Version, info.Client.Go)
			if s := info.Server; s != nil {
				fmt.Fprintf(a.io.Out, "Server: strata %s at %s (replica %s, leader %s)\n", s.Version, s.URL, s.Replica, printers.Cell(s.Leader))
			} else {
				fmt.Fprintf(a.io.Err, "server version unknown: %v\n", serverErr)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
