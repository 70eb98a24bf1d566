package api

import "testing"

func TestDNSConfigResolvConf(t *testing.T) {
	cases := []struct {
		name string
		d    *DNSConfig
		want string
	}{
		{"nil", nil, "\n"},
		{"empty", &DNSConfig{}, "\n"},
		{"nameservers", &DNSConfig{Nameservers: []string{"10.0.0.1", "fd00::1"}}, "nameserver 10.0.0.1\nnameserver fd00::1\n"},
		{"all", &DNSConfig{
			Nameservers: []string{"10.0.0.1"},
			Search:      []string{"web.acme.svc", "acme.svc"},
			Options:     []string{"ndots:2", "timeout:1"},
		}, "nameserver 10.0.0.1\nsearch web.acme.svc acme.svc\noptions ndots:2 timeout:1\n"},
		{"search only", &DNSConfig{Search: []string{"a"}}, "search a\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.d.ResolvConf(); got != c.want {
				t.Errorf("ResolvConf() = %q, want %q", got, c.want)
			}
		})
	}
}
