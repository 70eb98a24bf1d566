// Package redisclient builds the Redis client a tier's configuration asks
// for — one server, a master found through Sentinel, or a Redis Cluster —
// as a go-redis UniversalClient, which is what the heartbeat and event
// stores take. It also routes go-redis's own log lines into the process's
// structured logger (SetLogger).
package redisclient

import (
	"crypto/tls"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
)

// New returns a client for cfg, which must be Configured. It does not
// dial: a Redis that is down at start shows up as errors from the stores
// (and go-redis's log lines), not as a tier that refuses to start.
//
// Errors name the configuration key at fault and never carry a password.
func New(cfg config.Redis) (redis.UniversalClient, error) {
	if !cfg.Configured() {
		return nil, fmt.Errorf("redis: no redis configured (redis.addr, redis.sentinel or redis.cluster)")
	}
	opts, err := options(cfg)
	if err != nil {
		return nil, err
	}
	switch cfg.ModeOrDefault() {
	case config.RedisModeSentinel:
		return redis.NewFailoverClient(opts.Failover()), nil
	case config.RedisModeCluster:
		return redis.NewClusterClient(opts.Cluster()), nil
	default:
		return redis.NewClient(opts.Simple()), nil
	}
}

// options maps the configuration onto go-redis's. Exported fields left
// zero keep go-redis's defaults (timeouts, pool size, retries).
func options(cfg config.Redis) (*redis.UniversalOptions, error) {
	password, err := cfg.RedisPassword()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	tlsCfg, err := tlsConfig(cfg.TLS)
	if err != nil {
		return nil, err
	}
	o := &redis.UniversalOptions{
		Username:  cfg.Username,
		Password:  password,
		DB:        cfg.DB,
		TLSConfig: tlsCfg,
		// No CLIENT SETINFO and no CLIENT MAINT_NOTIFICATIONS on every
		// new connection: neither does anything for Strata, and leaving
		// them out keeps the ACL user's command list to what the stores
		// use (docs/operations.md, "Redis").
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	switch cfg.ModeOrDefault() {
	case config.RedisModeSentinel:
		o.MasterName = cfg.Sentinel.MasterName
		o.Addrs = cfg.Sentinel.Addrs
		o.SentinelUsername = cfg.Sentinel.Username
		if o.SentinelPassword, err = cfg.SentinelPassword(); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	case config.RedisModeCluster:
		o.Addrs = cfg.Cluster.Addrs
		o.IsClusterMode = true
	default:
		o.Addrs = []string{cfg.Addr}
	}
	return o, nil
}

// tlsConfig is the client side of TLS, or nil without TLS. An empty
// ServerName lets crypto/tls take each address's host, which is what a
// Cluster needs: its nodes are dialled by the addresses they announce. A
// client certificate is read again when its files change (pki.KeyPair),
// so a renewed one is used without a restart.
func tlsConfig(t config.RedisTLS) (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pool, err := pki.LoadPool(t.CA)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.ca: %w", err)
		}
		c.RootCAs = pool
	}
	if t.Cert != "" {
		pair, err := pki.LoadKeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.cert: %w", err)
		}
		c.GetClientCertificate = pair.GetClientCertificate
	}
	return c, nil
}
