package api

import (
	"fmt"
	"path"
	"regexp"
	"time"
	"unicode/utf8"
)

// Limits of Configs and Secrets. A Config or Secret is read whole on
// every replica that uses it and travels in one etcd value, so it stays
// well under etcd's request limit (1.5 MiB by default) and a REST body.
const (
	// MaxDataKeys bounds the keys of one Config or Secret.
	MaxDataKeys = 64
	// MaxDataKeyLen bounds a key (a file name when mounted).
	MaxDataKeyLen = 253
	// MaxDataBytes bounds the sum of a Config's or Secret's keys and
	// values, in bytes.
	MaxDataBytes = 256 << 10
)

// dataKeyRE is a key of a Config or Secret: it names a file when mounted
// and may name an environment variable, so it is letters, digits, '-',
// '_' and '.', and never "." or "..".
var dataKeyRE = regexp.MustCompile(`^[-._A-Za-z0-9]+$`)

// registryHostRE is a registry's host[:port], as image references name it.
var registryHostRE = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// Config is a tenant's named key/value data that Compute resources mount
// as files or take as environment variables. It is stored in plain text.
type Config struct {
	Name   string            `json:"name"`
	Tenant string            `json:"tenant,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Data is the keys and their values (UTF-8 text).
	Data map[string]string `json:"data,omitempty"`
	// Generation counts the changes of Data (server-set): the resources
	// that use the Config roll when it grows.
	Generation int64     `json:"generation,omitempty"`
	CreatedAt  time.Time `json:"createdAt,omitzero"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
	// ResourceVersion is the store's modification revision; send it back
	// on update to make the write conditional.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
}

// SecretType says what a Secret holds.
type SecretType string

const (
	// SecretOpaque is any key/value data (the default).
	SecretOpaque SecretType = "opaque"
	// SecretRegistry is the credentials of an image registry: the keys
	// registry (host[:port]), username and password, exactly.
	SecretRegistry SecretType = "registry"
)

// SecretTypes lists the secret types.
var SecretTypes = []SecretType{SecretOpaque, SecretRegistry}

// The keys of a SecretRegistry.
const (
	RegistryKeyHost     = "registry"
	RegistryKeyUsername = "username"
	RegistryKeyPassword = "password"
)

// Secret is a tenant's named key/value data, encrypted at rest. Reads
// return its Keys; Data only to a caller allowed to read secrets who asks
// for it.
type Secret struct {
	Name   string            `json:"name"`
	Tenant string            `json:"tenant,omitempty"`
	Type   SecretType        `json:"type,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Data is the keys and their values; written by clients, returned
	// only when revealed.
	Data map[string]string `json:"data,omitempty"`
	// Keys are Data's keys, sorted; set by the server.
	Keys []string `json:"keys,omitempty"`
	// Generation counts the changes of Data (server-set), as a Config's.
	Generation int64     `json:"generation,omitempty"`
	CreatedAt  time.Time `json:"createdAt,omitzero"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
	// ResourceVersion is the store's modification revision; send it back
	// on update to make the write conditional.
	ResourceVersion int64 `json:"resourceVersion,omitempty"`
}

// Validate checks a Config.
func (c *Config) Validate() error {
	var p problems
	p.add(ValidateName("name", c.Name))
	p.add(ValidateLabels("labels", c.Labels))
	p.add(validateData("data", c.Data))
	return p.err()
}

// Default fills a Secret's defaults.
func (s *Secret) Default() {
	if s.Type == "" {
		s.Type = SecretOpaque
	}
}

// Validate checks a Secret (after Default). Its messages never repeat a
// value, only keys.
func (s *Secret) Validate() error {
	var p problems
	p.add(ValidateName("name", s.Name))
	p.add(ValidateLabels("labels", s.Labels))
	p.add(oneOf("type", s.Type, SecretTypes...))
	p.add(validateData("data", s.Data))
	if s.Type == SecretRegistry {
		p.add(validateRegistryData(s.Data))
	}
	return p.err()
}

// validateData checks keys and sizes. Its messages never quote a value.
func validateData(field string, data map[string]string) error {
	if len(data) > MaxDataKeys {
		return Invalid(field, "has %d keys; at most %d", len(data), MaxDataKeys)
	}
	var p problems
	total := 0
	for _, k := range sortedKeys(data) {
		v := data[k]
		total += len(k) + len(v)
		switch {
		case len(k) > MaxDataKeyLen || !dataKeyRE.MatchString(k) || k == "." || k == "..":
			p.add(Invalid(field, "bad key %q: at most %d letters, digits, '-', '_' and '.', not . or ..", k, MaxDataKeyLen))
		case !utf8.ValidString(v):
			// Never the value: a secret's must not reach an error.
			p.add(Invalid(field+"."+k, "is not UTF-8 text"))
		}
	}
	if total > MaxDataBytes {
		p.add(Invalid(field, "holds %d bytes of keys and values; at most %d", total, MaxDataBytes))
	}
	return p.err()
}

// validateRegistryData checks the keys of a registry Secret.
func validateRegistryData(data map[string]string) error {
	var p problems
	for _, k := range []string{RegistryKeyHost, RegistryKeyUsername, RegistryKeyPassword} {
		if data[k] == "" {
			p.add(Invalid("data."+k, "is required in a %s secret", SecretRegistry))
		}
	}
	for _, k := range sortedKeys(data) {
		if k != RegistryKeyHost && k != RegistryKeyUsername && k != RegistryKeyPassword {
			p.add(Invalid("data", "key %q is not one of registry, username, password", k))
		}
	}
	if h := data[RegistryKeyHost]; h != "" {
		if len(h) > 255 || !registryHostRE.MatchString(h) {
			p.add(Invalid("data.registry", "%q is not a registry host[:port]", h))
		}
	}
	if hasControl(data[RegistryKeyUsername]) {
		p.add(Invalid("data.username", "holds control characters"))
	}
	return p.err()
}

// GetResourceVersion makes the REST edge send a Config's ETag.
func (c Config) GetResourceVersion() int64 { return c.ResourceVersion }

// GetResourceVersion makes the REST edge send a Secret's ETag.
func (s Secret) GetResourceVersion() int64 { return s.ResourceVersion }

// MaxConfigRefs bounds the Configs and Secrets one Compute spec names
// (files and envFrom together).
const MaxConfigRefs = 16

// ConfigRef names a Config or a Secret of the resource's tenant: exactly
// one of the two.
type ConfigRef struct {
	Config string `json:"config,omitempty"`
	Secret string `json:"secret,omitempty"`
}

// Kind is "config" or "secret".
func (r ConfigRef) Kind() string {
	if r.Secret != "" {
		return "secret"
	}
	return "config"
}

// Name is the Config's or Secret's name.
func (r ConfigRef) Name() string { return r.Config + r.Secret }

func (r ConfigRef) validate() error {
	switch {
	case r.Config == "" && r.Secret == "":
		return Invalid("", "names neither a config nor a secret")
	case r.Config != "" && r.Secret != "":
		return Invalid("", "names a config and a secret; one per entry")
	case r.Config != "":
		return ValidateName("config", r.Config)
	}
	return ValidateName("secret", r.Secret)
}

// FileMount mounts every key of a Config or Secret as a read-only file
// named after the key in the directory Path.
type FileMount struct {
	Config string `json:"config,omitempty"`
	Secret string `json:"secret,omitempty"`
	Path   string `json:"path"`
}

// Ref is the Config or Secret f mounts.
func (f FileMount) Ref() ConfigRef { return ConfigRef{Config: f.Config, Secret: f.Secret} }

// EnvSource takes environment variables from a Config or Secret: with
// Key, that key's value as the variable Name (default: the key); without,
// every key, each as the variable of its name (keys that are not
// variable names are an error on the node).
type EnvSource struct {
	Config string `json:"config,omitempty"`
	Secret string `json:"secret,omitempty"`
	Key    string `json:"key,omitempty"`
	Name   string `json:"name,omitempty"`
}

// Ref is the Config or Secret e reads.
func (e EnvSource) Ref() ConfigRef { return ConfigRef{Config: e.Config, Secret: e.Secret} }

// Refs lists the Configs and Secrets c names (files, envFrom and the
// pull secret), each once, in order.
func (c *ComputeSpec) Refs() []ConfigRef {
	var out []ConfigRef
	add := func(r ConfigRef) {
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	for _, ct := range c.podContainers() {
		for _, f := range ct.files {
			add(f.Ref())
		}
		for _, e := range ct.envFrom {
			add(e.Ref())
		}
	}
	if c.PullSecret != "" {
		add(ConfigRef{Secret: c.PullSecret})
	}
	return out
}

func (c *ComputeSpec) validateConfigRefs() error {
	var p problems
	p.add(validateFiles(c.Files))
	p.add(validateEnvFrom(c.EnvFrom))
	if c.PullSecret != "" {
		p.add(ValidateName("pullSecret", c.PullSecret))
	}
	if n := len(c.Refs()); n > MaxConfigRefs {
		p.add(Invalid("files", "with envFrom and pullSecret names %d configs and secrets; at most %d", n, MaxConfigRefs))
	}
	return p.err()
}

// validateFiles checks the Configs and Secrets a container mounts.
func validateFiles(files []FileMount) error {
	var p problems
	for i, f := range files {
		field := fmt.Sprintf("files[%d]", i)
		p.in(field, f.Ref().validate())
		if !path.IsAbs(f.Path) || path.Clean(f.Path) == "/" {
			p.add(Invalid(field+".path", "%q must be an absolute path other than /", f.Path))
		} else {
			p.add(validText(field+".path", f.Path, MaxPathLen))
		}
	}
	return p.err()
}

// validateEnvFrom checks the variables a container takes from Configs and
// Secrets.
func validateEnvFrom(envFrom []EnvSource) error {
	var p problems
	for i, e := range envFrom {
		field := fmt.Sprintf("envFrom[%d]", i)
		p.in(field, e.Ref().validate())
		switch {
		case e.Name != "" && e.Key == "":
			p.add(Invalid(field+".name", "needs a key (without one, every key is a variable of its own name)"))
		case e.Key != "" && (len(e.Key) > MaxDataKeyLen || !dataKeyRE.MatchString(e.Key)):
			p.add(Invalid(field+".key", "%q is not a key", e.Key))
		}
		if v := cmpOr(e.Name, e.Key); v != "" && (len(v) > MaxEnvNameLen || !envKeyRE.MatchString(v)) {
			p.add(Invalid(field+".name", "%q is not a variable name: letters, digits and '_', not starting with a digit", v))
		}
	}
	return p.err()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ValidEnvName reports whether s is an environment variable name.
func ValidEnvName(s string) bool { return len(s) <= MaxEnvNameLen && envKeyRE.MatchString(s) }
