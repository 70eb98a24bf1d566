package bringup

import (
	"fmt"
	"net"
	"slices"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/serving"
	"github.com/stratahq/strata/internal/transport"
)

// Listen is the sequence's first step, taken when the tier is made so
// that its addresses are known before Run: it opens the tier's
// listeners (those given, else on Config.Listen) and refuses a tier that
// would answer without an identity: its gRPC certificate must be self's
// (plaintext, in insecure mode, on loopback only), its REST API HTTPS
// with api.tls (plain HTTP on loopback, or in insecure mode). moreHosts
// are names the REST API answers to besides api.allowedHosts. On an
// error it closes what it opened.
func (b *Sequence) Listen(grpcL, httpL net.Listener, self pki.Identity, api config.HTTPAPI, moreHosts ...string) error {
	cfg := b.Config
	var err error
	if b.GRPCListener, err = serving.Listen(grpcL, cfg.Listen.GRPC, "listen grpc"); err != nil {
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	if b.HTTPListener, err = serving.Listen(httpL, cfg.Listen.HTTP, "listen http"); err != nil {
		b.GRPCListener.Close()
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	if err := b.secure(self, api, moreHosts); err != nil {
		b.GRPCListener.Close()
		b.HTTPListener.Close()
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	return nil
}

// secure builds the tier's gRPC security and its HTTP server's options,
// and checks its listeners against them.
func (b *Sequence) secure(self pki.Identity, api config.HTTPAPI, moreHosts []string) error {
	cfg := b.Config
	sec, err := transport.NewSecurity(cfg.TLS, cfg.Insecure)
	if err != nil {
		return err
	}
	if err := sec.Expect(self); err != nil {
		return err
	}
	if err := sec.CheckListener(b.GRPCListener); err != nil {
		return fmt.Errorf("listen.grpc: %w", err)
	}
	o := serving.HTTPOptions{Insecure: cfg.Insecure, AllowedHosts: append(slices.Clone(api.AllowedHosts), moreHosts...), ReadTimeout: api.ReadTimeout, Log: b.Log}
	if api.TLS.Enabled() {
		if o.TLS, err = pki.ServingConfig(api.TLS.Cert, api.TLS.Key); err != nil {
			return fmt.Errorf("api.tls: %w", err)
		}
	}
	if err := serving.CheckListener(b.HTTPListener, o); err != nil {
		return fmt.Errorf("listen.http: %w", err)
	}
	b.Security, b.HTTP = sec, o
	return nil
}
