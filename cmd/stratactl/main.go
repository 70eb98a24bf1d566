// Command stratactl is the operator's CLI for Strata's global REST API.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/version"
)

func main() {
	root := &cobra.Command{
		Use:           "stratactl",
		Short:         "Drive a Strata cluster through its global REST API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "stratactl", version.String())
		},
	})
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "stratactl:", err)
		os.Exit(1)
	}
}
