package redistest

import (
	"testing"

	"github.com/stratahq/strata/internal/config"
)

// Mode is a Redis deployment a tier can be configured for, for running a
// store's conformance suite against each.
type Mode struct {
	Name string
	// Start starts the deployment for the test with an ACL user (name,
	// password, rules) and returns the configuration a tier would use to
	// reach it as that user.
	Start func(t testing.TB, name, password string, rules ...string) config.Redis
}

// Modes are the deployments Strata supports, each over TLS with a client
// certificate and an ACL user: a single server, a Sentinel group (whose
// sentinels require a password too), and a cluster of three masters.
func Modes() []Mode {
	return []Mode{
		{"single", func(t testing.TB, name, password string, rules ...string) config.Redis {
			x := NewTLS(t)
			s := Start(t, WithTLS(x), WithUser(name, password, rules...))
			return config.Redis{
				Mode: config.RedisModeSingle, Addr: s.Addr(),
				Username: name, Password: password, TLS: x.Config(true),
			}
		}},
		{"sentinel", func(t testing.TB, name, password string, rules ...string) config.Redis {
			x := NewTLS(t)
			g := StartSentinel(t, WithSentinelPassword("sentinel-"+password),
				WithServerOptions(WithTLS(x), WithUser(name, password, rules...)))
			return config.Redis{
				Mode:     config.RedisModeSentinel,
				Sentinel: config.RedisSentinel{MasterName: MasterName, Addrs: g.SentinelAddrs(), Password: "sentinel-" + password},
				Username: name, Password: password, TLS: x.Config(false),
			}
		}},
		{"cluster", func(t testing.TB, name, password string, rules ...string) config.Redis {
			x := NewTLS(t)
			c := StartCluster(t, 3, WithTLS(x), WithUser(name, password, rules...))
			return config.Redis{
				Mode:     config.RedisModeCluster,
				Cluster:  config.RedisCluster{Addrs: c.Addrs()[:1]}, // one seed finds the rest
				Username: name, Password: password, TLS: x.Config(false),
			}
		}},
	}
}

// Config is the client side of x as a tier configures it; with
// serverName, the server's certificate is checked against ServerName
// instead of each address's host.
func (x *TLS) Config(serverName bool) config.RedisTLS {
	c := config.RedisTLS{Enabled: true, CA: x.CA, Cert: x.ClientCert, Key: x.ClientKey}
	if serverName {
		c.ServerName = x.ServerName
	}
	return c
}
