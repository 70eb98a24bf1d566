package main

import (
	"github.com/stratahq/strata/providers/containerd"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/haproxy"
	"github.com/stratahq/strata/providers/provider"
)

// providers are the providers built into this binary; libvirt runs as its
// own plugin binary (it needs cgo).
func providers() *provider.Registry {
	r := provider.NewRegistry()
	r.Register("containerd", containerd.Factory)
	r.Register("fake", fake.Factory)
	r.Register("haproxy", haproxy.Factory)
	return r
}
