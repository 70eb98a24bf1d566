package client

import (
	"context"
	"net/http"
)

// Resolution is a node's name server's answer to one question, as GET
// /v1/resolve shows it.
type Resolution struct {
	// Name is the name asked, completed by the search path and fully
	// qualified.
	Name string `json:"name"`
	Type string `json:"type"`
	// Rcode is NOERROR, NXDOMAIN (no such name, or another tenant's),
	// REFUSED (outside the zone), ...
	Rcode      string           `json:"rcode"`
	Answers    []ResolvedRecord `json:"answers"`
	Additional []ResolvedRecord `json:"additional"`
	// Unreachable are regions that did not answer: the answer may miss
	// their replicas.
	Unreachable []string `json:"unreachable,omitempty"`
}

// ResolvedRecord is one record of an answer; Data is the address (A,
// AAAA) or "priority weight port target" (SRV).
type ResolvedRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	TTL  uint32 `json:"ttl"`
	Data string `json:"data"`
}

// ResolveQuery is what Resolve asks: Type "" is A; Region "" lets the
// server pick (the name's region, else the resource's first).
type ResolveQuery struct {
	Name, Type, Region string
}

// Resolve asks what a node's name server of q.Region would answer the
// client's tenant for q.Name.
func (c *Client) Resolve(ctx context.Context, q ResolveQuery) (Resolution, error) {
	query := c.conn.tenantQuery()
	query.Set("name", q.Name)
	if q.Type != "" {
		query.Set("type", q.Type)
	}
	if q.Region != "" {
		query.Set("region", q.Region)
	}
	return call[Resolution](ctx, c.conn, request{method: http.MethodGet, path: "/v1/resolve", query: query})
}
