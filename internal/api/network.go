package api

import "time"

// Network (NetworkV4 in the seeds) is a region IPv4 network that replicas
// get addresses on.
type Network struct {
	Name    string `json:"name"`
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway"`
	// Reserved are addresses or ranges ("10.0.0.1-10.0.0.9") never handed
	// out.
	Reserved []string `json:"reserved,omitempty"`
	// Bridge is the Linux bridge the network lives on, on every node.
	Bridge    string    `json:"bridge"`
	Default   bool      `json:"default,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Port (NetworkV4Port in the seeds) is an address held by one replica.
type Port struct {
	Network    string    `json:"network"`
	Address    string    `json:"address"`
	Assignment string    `json:"assignment"`
	CreatedAt  time.Time `json:"createdAt"`
}

// Tenant owns resources and is bounded by quotas.
type Tenant struct {
	Name      string    `json:"name"`
	Quota     Quota     `json:"quota,omitzero"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Quota bounds a tenant; zero means unlimited.
type Quota struct {
	Resources int     `json:"resources,omitempty"`
	Replicas  int     `json:"replicas,omitempty"`
	VCPUs     float64 `json:"vcpus,omitempty"`
	MemoryMiB int64   `json:"memoryMiB,omitempty"`
}

// Role is what a token may do.
type Role string

const (
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
	RoleMember   Role = "member"
	RoleViewer   Role = "viewer"
)

// Token is a bearer token; only its hash is stored.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Hash      string    `json:"hash"`
	Tenant    string    `json:"tenant"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}
