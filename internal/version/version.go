// Package version holds the build's version, set by the linker
// (-X github.com/stratahq/strata/internal/version.Version=...).
package version

import "runtime/debug"

// Version is the release or git description of this build.
var Version = ""

// String returns the version, falling back to the module's build info.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
