package api

import (
	"errors"
	"strings"
	"testing"
)

func TestNetworkPolicyValidate(t *testing.T) {
	ok := NetworkPolicy{Name: "web", Selector: map[string]string{"app": "web"}, Ingress: []IngressRule{{
		From:  []PolicyPeer{{Resources: &PeerSelector{}}, {IPBlock: &IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}},
		Ports: []PolicyPort{{Port: 80}, {Protocol: ProtocolUDP, Port: 5000, EndPort: 5010}, {}},
	}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	for _, c := range []struct {
		name  string
		p     NetworkPolicy
		field string
		msg   string
	}{
		{"host bits", NetworkPolicy{Name: "p", Ingress: []IngressRule{{From: []PolicyPeer{{IPBlock: &IPBlock{CIDR: "10.1.2.3/8"}}}}}}, "ingress[0].from[0].ipBlock.cidr", "did you mean 10.0.0.0/8"},
		{"ipv6", NetworkPolicy{Name: "p", Ingress: []IngressRule{{From: []PolicyPeer{{IPBlock: &IPBlock{CIDR: "fd00::/8"}}}}}}, "ingress[0].from[0].ipBlock.cidr", "not an IPv4 CIDR"},
		{"except outside", NetworkPolicy{Name: "p", Ingress: []IngressRule{{From: []PolicyPeer{{IPBlock: &IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/8"}}}}}}}, "ingress[0].from[0].ipBlock.except[0]", "not inside"},
		{"empty peer", NetworkPolicy{Name: "p", Ingress: []IngressRule{{From: []PolicyPeer{{}}}}}, "ingress[0].from[0]", "neither"},
		{"end before start", NetworkPolicy{Name: "p", Ingress: []IngressRule{{Ports: []PolicyPort{{Port: 90, EndPort: 80}}}}}, "ingress[0].ports[0].endPort", "between"},
		{"end without start", NetworkPolicy{Name: "p", Ingress: []IngressRule{{Ports: []PolicyPort{{EndPort: 80}}}}}, "ingress[0].ports[0].endPort", "needs port"},
		{"bad label", NetworkPolicy{Name: "p", Selector: map[string]string{"a": "b c"}}, "selector.a", "bad label value"},
	} {
		err := c.p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Message, c.msg) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v; want field %s saying %q", c.name, err, c.field, c.msg)
		}
	}
}

func TestPolicyPortRange(t *testing.T) {
	for _, c := range []struct {
		p      PolicyPort
		proto  string
		lo, hi int
	}{
		{PolicyPort{}, "tcp", 0, 65535},
		{PolicyPort{Protocol: "udp", Port: 53}, "udp", 53, 53},
		{PolicyPort{Port: 8000, EndPort: 8080}, "tcp", 8000, 8080},
	} {
		if proto, lo, hi := c.p.Range(); proto != c.proto || lo != c.lo || hi != c.hi {
			t.Errorf("%+v: got %s %d-%d; want %s %d-%d", c.p, proto, lo, hi, c.proto, c.lo, c.hi)
		}
	}
}
