package state

import (
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/secretbox"
)

// The key layout of Configs and Secrets (tenant-scoped, like resources):
//
//	configs/<tenant>/<name>               api.Config (plain text)
//	secrets/<tenant>/<name>               SealedSecret (data encrypted)

// SealedSecret is a Secret as stored: everything but its data in the
// clear, its data (the JSON of the key/value map) in an envelope sealed
// for the secret's name (tenant/name), so that etcd, its backups and
// snapshots never hold a value in plain text.
type SealedSecret struct {
	Name       string             `json:"name"`
	Tenant     string             `json:"tenant"`
	Type       api.SecretType     `json:"type"`
	Labels     map[string]string  `json:"labels,omitempty"`
	Keys       []string           `json:"keys,omitempty"`
	Generation int64              `json:"generation,omitempty"`
	Sealed     secretbox.Envelope `json:"sealed"`
	CreatedAt  time.Time          `json:"createdAt,omitzero"`
	UpdatedAt  time.Time          `json:"updatedAt,omitzero"`
}
