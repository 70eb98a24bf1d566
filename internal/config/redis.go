package config

import (
	"fmt"
	"os"
	"strings"
)

// Redis modes.
const (
	RedisModeSingle   = "single"
	RedisModeSentinel = "sentinel"
	RedisModeCluster  = "cluster"
)

// Redis is where a tier keeps its hot data (heartbeats, events): one
// server, a master found through Sentinel, or a Redis Cluster. Mode single
// with an empty Addr keeps the data in memory instead: fine for one
// process, lost on restart.
//
// Passwords are read, never logged, and never appear in an error.
type Redis struct {
	// Mode is single (the default), sentinel or cluster.
	Mode string `mapstructure:"mode"`
	// Addr is the server of mode single (host:port).
	Addr     string        `mapstructure:"addr"`
	Sentinel RedisSentinel `mapstructure:"sentinel"`
	Cluster  RedisCluster  `mapstructure:"cluster"`
	// Username and Password (or PasswordFile, read at start) log in to
	// the data nodes: an ACL user, or the default user (requirepass) when
	// Username is empty.
	Username     string `mapstructure:"username"`
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"passwordFile"`
	// DB is the database number; Cluster has only 0.
	DB  int      `mapstructure:"db"`
	TLS RedisTLS `mapstructure:"tls"`
}

// RedisSentinel is how mode sentinel finds the master.
type RedisSentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	MasterName string `mapstructure:"masterName"`
	// Addrs are sentinels (host:port); any one that answers will do.
	Addrs []string `mapstructure:"addrs"`
	// Username and Password (or PasswordFile) log in to the sentinels,
	// which have their own users (requirepass or ACL in sentinel.conf).
	Username     string `mapstructure:"username"`
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"passwordFile"`
}

// RedisCluster is where mode cluster starts discovering the cluster.
type RedisCluster struct {
	// Addrs are seed nodes (host:port); the client learns the rest.
	Addrs []string `mapstructure:"addrs"`
}

// RedisTLS is the client side of TLS to Redis (and to the sentinels, in
// mode sentinel: go-redis uses one TLS configuration for both).
type RedisTLS struct {
	// Enabled turns TLS on with the system's roots; setting ca, cert or
	// serverName turns it on too.
	Enabled bool `mapstructure:"enabled"`
	// CA verifies the servers instead of the system's roots.
	CA string `mapstructure:"ca"`
	// Cert and Key are a client certificate, for servers that require
	// one (tls-auth-clients yes).
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
	// ServerName is the name the servers' certificates must carry;
	// empty means the host of each address.
	ServerName string `mapstructure:"serverName"`
}

// On reports whether TLS is configured.
func (t RedisTLS) On() bool {
	return t.Enabled || t.CA != "" || t.Cert != "" || t.Key != "" || t.ServerName != ""
}

// Configured reports whether a Redis is configured; false means the tier
// keeps hot data in memory.
func (r *Redis) Configured() bool {
	return r.ModeOrDefault() != RedisModeSingle || r.Addr != ""
}

// ModeOrDefault is Mode, with empty meaning single.
func (r *Redis) ModeOrDefault() string {
	if r.Mode == "" {
		return RedisModeSingle
	}
	return r.Mode
}

// RedisPassword returns the data nodes' password, reading PasswordFile
// when that is set.
func (r *Redis) RedisPassword() (string, error) {
	return secret(r.Password, r.PasswordFile, "redis.passwordFile")
}

// SentinelPassword returns the sentinels' password, reading
// Sentinel.PasswordFile when that is set.
func (r *Redis) SentinelPassword() (string, error) {
	return secret(r.Sentinel.Password, r.Sentinel.PasswordFile, "redis.sentinel.passwordFile")
}

// secret is value, or the first line of file when file is set. The error
// names the key and the file, never the content.
func secret(value, file, key string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

func (r *Redis) validate(key string) error {
	mode := r.ModeOrDefault()
	var err error
	switch mode {
	case RedisModeSingle:
		if r.Addr == "" {
			// In memory: nothing else to check.
			return r.validateMemory(key)
		}
		err = r.validateSingle(key)
	case RedisModeSentinel:
		err = r.validateSentinel(key)
	case RedisModeCluster:
		err = r.validateCluster(key)
	default:
		return keyError(key+".mode", "%q is not one of single, sentinel, cluster", r.Mode)
	}
	if err != nil {
		return err
	}
	if r.DB < 0 {
		return keyError(key+".db", "must not be negative (got %d)", r.DB)
	}
	if err := validCredentials(key, r.Username, r.Password, r.PasswordFile); err != nil {
		return err
	}
	return r.TLS.validate(key + ".tls")
}

// otherModes refuses the settings of the modes that are not r's.
func (r *Redis) otherModes(key, mode string) error {
	if r.Sentinel.MasterName != "" || len(r.Sentinel.Addrs) > 0 {
		return keyError(key+".sentinel", "is set but %s.mode is %s (set %s.mode: sentinel)", key, mode, key)
	}
	if len(r.Cluster.Addrs) > 0 {
		return keyError(key+".cluster.addrs", "is set but %s.mode is %s (set %s.mode: cluster)", key, mode, key)
	}
	return nil
}

// validateMemory checks mode single without an address: the in-memory
// store, for which credentials or TLS without a server are a mistake
// worth stopping for.
func (r *Redis) validateMemory(key string) error {
	if err := r.otherModes(key, RedisModeSingle); err != nil {
		return err
	}
	if r.Username != "" || r.Password != "" || r.PasswordFile != "" || r.TLS.On() {
		return keyError(key+".addr", "is required when %s credentials or tls are set", key)
	}
	return nil
}

func (r *Redis) validateSingle(key string) error {
	if err := r.otherModes(key, RedisModeSingle); err != nil {
		return err
	}
	return validAddr(key+".addr", r.Addr)
}

func (r *Redis) validateSentinel(key string) error {
	if r.Addr != "" {
		return keyError(key+".addr", "is for mode single; mode sentinel finds the master through %s.sentinel.addrs", key)
	}
	if len(r.Cluster.Addrs) > 0 {
		return keyError(key+".cluster.addrs", "is for mode cluster, not sentinel")
	}
	if r.Sentinel.MasterName == "" {
		return keyError(key+".sentinel.masterName", "is required with %s.mode: sentinel", key)
	}
	if len(r.Sentinel.Addrs) == 0 {
		return keyError(key+".sentinel.addrs", "is required with %s.mode: sentinel (one or more sentinels)", key)
	}
	if err := validAddrs(key+".sentinel.addrs", r.Sentinel.Addrs); err != nil {
		return err
	}
	return validCredentials(key+".sentinel", r.Sentinel.Username, r.Sentinel.Password, r.Sentinel.PasswordFile)
}

func (r *Redis) validateCluster(key string) error {
	if r.Addr != "" {
		return keyError(key+".addr", "is for mode single; mode cluster starts from %s.cluster.addrs", key)
	}
	if r.Sentinel.MasterName != "" || len(r.Sentinel.Addrs) > 0 {
		return keyError(key+".sentinel", "is for mode sentinel, not cluster")
	}
	if len(r.Cluster.Addrs) == 0 {
		return keyError(key+".cluster.addrs", "is required with %s.mode: cluster (one or more seed nodes)", key)
	}
	if err := validAddrs(key+".cluster.addrs", r.Cluster.Addrs); err != nil {
		return err
	}
	if r.DB != 0 {
		return keyError(key+".db", "must be 0 with %s.mode: cluster (a cluster has one database)", key)
	}
	return nil
}

func (t *RedisTLS) validate(key string) error {
	if (t.Cert == "") != (t.Key == "") {
		return keyError(key+".cert", "and %s.key go together", key)
	}
	for k, f := range map[string]string{"ca": t.CA, "cert": t.Cert, "key": t.Key} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return keyError(key+"."+k, "%v", err)
		}
	}
	return nil
}

// validCredentials checks a username/password/passwordFile triple
// without ever putting the password into the error.
func validCredentials(key, user, password, file string) error {
	if password != "" && file != "" {
		return keyError(key+".password", "set %s.password or %s.passwordFile, not both", key, key)
	}
	if user != "" && password == "" && file == "" {
		return keyError(key+".password", "is required with %s.username (or set %s.passwordFile)", key, key)
	}
	if file != "" {
		if _, err := os.Stat(file); err != nil {
			return keyError(key+".passwordFile", "%v", err)
		}
	}
	return nil
}

func validAddrs(key string, addrs []string) error {
	for i, a := range addrs {
		if err := validAddr(fmt.Sprintf("%s[%d]", key, i), a); err != nil {
			return err
		}
	}
	return nil
}
