// Command strata-provider-libvirt serves the libvirt provider (VMs) as a
// plugin binary. It needs cgo and libvirt's client library, which is why
// it is not built into the pure-Go strata binary; an agent runs it with
//
//	providers:
//	  - name: libvirt
//	    plugin: /path/to/strata-provider-libvirt
//	    options: {uri: qemu:///system, pool: strata, domainType: auto}
package main

import (
	"github.com/stratahq/strata/providers/libvirt"
	"github.com/stratahq/strata/providers/provider"
)

func main() { provider.PluginMain("libvirt", libvirt.Factory) }
