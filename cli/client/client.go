// Package client speaks to Strata's global REST API for stratactl: JSON in
// and out, bearer-token auth, the API's error body turned into *APIError,
// and failures to reach the server told apart (*ConnError) so that the CLI
// can give scripts an exit code per class of failure.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// DefaultTimeout bounds one non-streaming request.
const DefaultTimeout = 30 * time.Second

// Options configure a Client.
type Options struct {
	// URL is the global API, http(s)://host:port.
	URL string
	// Token is sent as "Authorization: Bearer <token>" when set.
	Token string
	// CAPEM, when set, is the only CA trusted for https.
	CAPEM []byte
	// Tenant is sent as ?tenant= on resource routes (admins act in other
	// tenants with it).
	Tenant string
	// Timeout bounds one non-streaming request; 0 means DefaultTimeout.
	Timeout time.Duration
	// UserAgent names the client to the server's logs.
	UserAgent string
	// RetryBackoff is the first pause before retrying a 503 (doubling
	// after); 0 means 200ms.
	RetryBackoff time.Duration
}

// Client is a client of the global REST API: a connection to the server
// (conn.go) and, one field each, the API's kinds of object over it. It
// does not lock: its fields are set by New and never change.
type Client struct {
	conn *conn

	Flavors    Objects[api.Flavor]
	Policies   Objects[api.NetworkPolicy]
	Configs    Objects[api.Config]
	Secrets    Secrets
	AlertRules Objects[api.AlertRule]
	Resources  Resources
	Regions    Regions
	Nodes      Nodes
	Tokens     Tokens
	Tenants    Tenants
	Events     Events
}

// New returns a client; it does not contact the server.
func New(o Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("server url %q is not http(s)://host:port", o.URL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(o.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CAPEM) {
			return nil, errors.New("the CA holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &conn{
		base: u, token: o.Token, tenant: o.Tenant, timeout: o.Timeout, agent: o.UserAgent, backoff: o.RetryBackoff,
		// No client-wide timeout: streams (logs -f, events -w) live as long
		// as their context; plain requests get one per request instead.
		http: &http.Client{Transport: tr},
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.agent == "" {
		c.agent = "stratactl"
	}
	if c.backoff <= 0 {
		c.backoff = 200 * time.Millisecond
	}
	return over(c), nil
}

// over is the client of the connection c: every kind of object on it.
func over(c *conn) *Client {
	return &Client{
		conn:       c,
		Flavors:    Objects[api.Flavor]{c: c, path: "/v1/flavors", paged: true, name: func(f api.Flavor) string { return f.Name }},
		Policies:   Objects[api.NetworkPolicy]{c: c, path: "/v1/networkpolicies", tenanted: true, name: func(p api.NetworkPolicy) string { return p.Name }},
		Configs:    Objects[api.Config]{c: c, path: "/v1/configs", tenanted: true, paged: true, name: func(cf api.Config) string { return cf.Name }},
		Secrets:    Secrets{c: c},
		AlertRules: Objects[api.AlertRule]{c: c, path: "/v1/alertrules", paged: true, name: func(r api.AlertRule) string { return r.Name }},
		Resources:  Resources{c: c},
		Regions:    Regions{c: c},
		Nodes:      Nodes{c: c},
		Tokens:     Tokens{c: c},
		Tenants:    Tenants{c: c},
		Events:     Events{c: c},
	}
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.conn.base.String() }

// Tenant returns the tenant the client acts in ("" for the caller's own).
func (c *Client) Tenant() string { return c.conn.tenant }

// WithTenant returns a client that acts in tenant; it shares c's
// connections.
func (c *Client) WithTenant(tenant string) *Client {
	cc := *c.conn
	cc.tenant = tenant
	return over(&cc)
}

// Status returns the global tier's overview, with the server's version.
func (c *Client) Status(ctx context.Context) (Status, error) {
	return call[Status](ctx, c.conn, request{method: http.MethodGet, path: "/v1/status"})
}
