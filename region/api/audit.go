package api

import (
	"context"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/audit"
)

// auditor owns the region's audit records: the REST calls and the gRPC
// calls that change something, written to the audit log as region:<name>.
type auditor struct {
	region string
	log    *audit.Log
}

// operatorKey marks a request that presented the region's token.
type operatorKey struct{}

// rest records a REST call that changes something: by the region
// token's holder, or by nobody known when the token was refused.
func (a *auditor) rest(r *http.Request, code int, took time.Duration) {
	e := audit.HTTPEntry("region:"+a.region, r, code, took)
	if ok, _ := r.Context().Value(operatorKey{}).(bool); ok {
		e.Who.Identity = "region-token"
	}
	a.log.Record(e)
}

// grpc records a gRPC call that changes something.
func (a *auditor) grpc(ctx context.Context, method string, req any, err error, took time.Duration) {
	if audit.MutatingRPC(method) {
		a.log.Record(audit.GRPCEntry(ctx, "region:"+a.region, method, req, err, took))
	}
}
