package manifest

import (
	"maps"

	"github.com/stratahq/strata/internal/api"
)

// ConfigDocument is a config as a manifest: its REST JSON with kind
// "Config".
type ConfigDocument struct {
	Kind Kind `json:"kind"`
	api.Config
}

// FromConfig returns c as a manifest.
func FromConfig(c api.Config) ConfigDocument { return ConfigDocument{Kind: KindConfig, Config: c} }

func parseConfig(js []byte) (*api.Config, error) {
	var d ConfigDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	c := &api.Config{Name: d.Name, Tenant: d.Tenant, Labels: d.Labels, Data: d.Data}
	return c, c.Validate()
}

// SecretDocument is a secret as a manifest: its REST JSON with kind
// "Secret". What `get -o yaml` prints has keys but no data (unless
// revealed), so a manifest of a secret must carry its data to apply.
type SecretDocument struct {
	Kind Kind `json:"kind"`
	api.Secret
}

// FromSecret returns s as a manifest.
func FromSecret(s api.Secret) SecretDocument { return SecretDocument{Kind: KindSecret, Secret: s} }

func parseSecret(js []byte) (*api.Secret, error) {
	var d SecretDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	s := &api.Secret{Name: d.Name, Tenant: d.Tenant, Type: d.Type, Labels: d.Labels, Data: d.Data}
	s.Default()
	return s, s.Validate()
}

// ConfigUpToDate reports whether cur already is what want says.
func ConfigUpToDate(want, cur api.Config) bool {
	return maps.Equal(want.Data, cur.Data) && maps.Equal(want.Labels, cur.Labels)
}

// SecretUpToDate reports whether cur (read with its values) already is
// what want says.
func SecretUpToDate(want, cur api.Secret) bool {
	return want.Type == cur.Type && maps.Equal(want.Data, cur.Data) && maps.Equal(want.Labels, cur.Labels)
}
