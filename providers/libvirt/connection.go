package libvirt

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
)

// connection owns the provider's one connection to libvirtd: it
// reconnects when libvirtd went away (it restarts on upgrades; its
// domains live on) and turns the connection's lifecycle events into the
// ids of the replicas to look at.
type connection struct {
	uri string
	log *slog.Logger
	// onDomain is told the replica id of each lifecycle event; it runs on
	// libvirt's event loop and must not block.
	onDomain func(id string)

	mu   sync.Mutex
	conn *libvirt.Connect // nil until connected
	// lifecycle is the id of conn's lifecycle event callback, -1 if none.
	lifecycle int
}

func newConnection(uri string, log *slog.Logger, onDomain func(id string)) *connection {
	return &connection{uri: uri, log: log, onDomain: onDomain, lifecycle: -1}
}

// eventLoop registers and runs libvirt's default event loop, once per
// process. It is process-wide state of the C library (registering it again
// would replace it under live connections), so it cannot belong to a
// Provider. Connections need it for lifecycle events and keepalives.
var eventLoop = sync.OnceValue(func() error {
	if err := libvirt.EventRegisterDefaultImpl(); err != nil {
		return fmt.Errorf("register libvirt's event loop: %w", err)
	}
	go func() {
		for {
			if err := libvirt.EventRunDefaultImpl(); err != nil {
				// Only a broken loop fails; do not spin.
				time.Sleep(time.Second)
			}
		}
	}()
	return nil
})

func isTestURI(uri string) bool {
	return strings.HasPrefix(uri, "test:") || strings.HasPrefix(uri, "test+")
}

// connect returns the live connection, reconnecting when libvirtd went
// away.
func (k *connection) connect() (*libvirt.Connect, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conn != nil {
		if alive, err := k.conn.IsAlive(); err == nil && alive {
			return k.conn, nil
		}
		k.log.Warn("libvirt connection lost; reconnecting")
		k.dropLocked()
	}
	if err := eventLoop(); err != nil {
		k.log.Warn("no libvirt event loop: lifecycle events off, polling only", "err", err)
	}
	c, err := libvirt.NewConnect(k.uri)
	if err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w", k.uri, err)
	}
	if !isTestURI(k.uri) {
		// Detects a libvirtd that died without closing the socket.
		if err := c.SetKeepAlive(5, 3); err != nil {
			k.log.Debug("libvirt keepalive unavailable", "err", err)
		}
	}
	id, err := c.DomainEventLifecycleRegister(nil, k.onLifecycle)
	if err != nil {
		k.log.Warn("libvirt lifecycle events unavailable: watching by polling only", "err", err)
		id = -1
	}
	k.conn, k.lifecycle = c, id
	return c, nil
}

// close closes the connection, if any.
func (k *connection) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked()
}

func (k *connection) dropLocked() {
	if k.conn == nil {
		return
	}
	if k.lifecycle >= 0 {
		_ = k.conn.DomainEventDeregister(k.lifecycle)
	}
	if _, err := k.conn.Close(); err != nil {
		k.log.Debug("close libvirt connection", "err", err)
	}
	k.conn, k.lifecycle = nil, -1
}

// onLifecycle runs on libvirt's event loop: it must not block, so it only
// says which replica to look at.
func (k *connection) onLifecycle(_ *libvirt.Connect, d *libvirt.Domain, _ *libvirt.DomainEventLifecycle) {
	name, err := d.GetName()
	if err != nil {
		return
	}
	if id, ok := idFromDomainName(name); ok {
		k.onDomain(id)
	}
}

// ---- libvirt errors ----

// hasCode reports whether err is a libvirt error with one of codes.
func hasCode(err error, codes ...libvirt.ErrorNumber) bool {
	var le libvirt.Error
	if !errors.As(err, &le) {
		return false
	}
	for _, c := range codes {
		if le.Code == c {
			return true
		}
	}
	return false
}

// message is err's text without the binding's virError(...) wrapping, for
// reasons users read.
func message(err error) string {
	var le libvirt.Error
	if errors.As(err, &le) {
		return le.Message
	}
	return err.Error()
}

// callFailed tells errors of the call (libvirtd gone, connection broken),
// which Apply returns, from errors of the replica (a bad kernel path, a
// missing bridge), which it reports in the status.
func callFailed(err error) bool {
	return hasCode(err, libvirt.ERR_RPC, libvirt.ERR_NO_CONNECT, libvirt.ERR_AUTH_FAILED,
		libvirt.ERR_OPERATION_TIMEOUT, libvirt.ERR_INVALID_CONN) ||
		strings.Contains(message(err), "client socket is closed")
}
