package main

import (
	"crypto/tls"

	"github.com/stratahq/strata/internal/pki"
)

// clusterCerts is a production-shaped cluster's CA and the certificates
// of its tiers and nodes, in one directory.
type clusterCerts struct {
	ca       *pki.CA
	caFile   string
	regionID string
	// client trusts the CA: what the benchmarks' REST clients dial with.
	client *tls.Config
}

// makeCerts makes the CA and the certificates of the tiers (g1, g2, the
// region) in dir.
func makeCerts(dir, regionID string) (*clusterCerts, error) {
	ca, err := pki.NewCA("strata bench CA")
	if err != nil {
		return nil, err
	}
	cc := &clusterCerts{ca: ca, regionID: regionID}
	if cc.caFile, _, err = ca.WriteCA(dir); err != nil {
		return nil, err
	}
	for file, id := range map[string]pki.Identity{"g1": pki.Global("g1"), "g2": pki.Global("g2"), "region": pki.Region(regionID)} {
		if _, err := ca.WriteIdentity(dir, file, id.String(), []string{"127.0.0.1", "localhost"}); err != nil {
			return nil, err
		}
	}
	pool, err := pki.LoadPool(cc.caFile)
	if err != nil {
		return nil, err
	}
	cc.client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return cc, nil
}

// nodeCerts issues node certificates for names into dir.
func (cc *clusterCerts) nodeCerts(dir string, names ...string) error {
	for _, n := range names {
		if _, err := cc.ca.WriteIdentity(dir, n, pki.Node(cc.regionID, n).String(), []string{"127.0.0.1"}); err != nil {
			return err
		}
	}
	return nil
}
