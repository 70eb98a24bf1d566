// Command fakeplugin serves the fake provider as a plugin binary, for
// tests of plugin supervision and for trying the agent without real
// providers.
package main

import (
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

func main() { provider.PluginMain("fake", fake.Factory) }
