package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorBody is the JSON body of every REST error:
//
//	{"error": {"code": "InvalidArgument", "message": "...", "field": "replicas"}}
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is the first field at fault, as a JSON path
	// ("schedule.regions[0].weight").
	Field string `json:"field,omitempty"`
	// Details are all the fields at fault (a request's every validation
	// error, in the order found), when there are any.
	Details []FieldDetail `json:"details,omitempty"`
}

// FieldDetail is one field at fault.
type FieldDetail struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

type errClass struct {
	sentinel error
	code     string
	http     int
	grpc     codes.Code
}

// classes maps each sentinel to its wire forms, in one place.
var classes = []errClass{
	{ErrInvalid, "InvalidArgument", http.StatusBadRequest, codes.InvalidArgument},
	{ErrNotFound, "NotFound", http.StatusNotFound, codes.NotFound},
	{ErrAlreadyExists, "AlreadyExists", http.StatusConflict, codes.AlreadyExists},
	{ErrConflict, "Conflict", http.StatusConflict, codes.Aborted},
	{ErrNotLeader, "NotLeader", http.StatusServiceUnavailable, codes.Unavailable},
	{ErrUnavailable, "Unavailable", http.StatusServiceUnavailable, codes.Unavailable},
	{ErrUnauthenticated, "Unauthenticated", http.StatusUnauthorized, codes.Unauthenticated},
	{ErrForbidden, "Forbidden", http.StatusForbidden, codes.PermissionDenied},
	{ErrQuotaExceeded, "QuotaExceeded", http.StatusForbidden, codes.ResourceExhausted},
	{ErrTooLarge, "TooLarge", http.StatusRequestEntityTooLarge, codes.InvalidArgument},
	{ErrExhausted, "Exhausted", http.StatusServiceUnavailable, codes.ResourceExhausted},
	{ErrUnsupportedMedia, "UnsupportedMediaType", http.StatusUnsupportedMediaType, codes.InvalidArgument},
	{ErrHeaderTooLarge, "HeaderTooLarge", http.StatusRequestHeaderFieldsTooLarge, codes.InvalidArgument},
	{ErrURITooLong, "URITooLong", http.StatusRequestURITooLong, codes.InvalidArgument},
	{context.DeadlineExceeded, "DeadlineExceeded", http.StatusGatewayTimeout, codes.DeadlineExceeded},
	{context.Canceled, "Canceled", 499, codes.Canceled},
}

func classify(err error) (errClass, bool) {
	for _, c := range classes {
		if errors.Is(err, c.sentinel) {
			return c, true
		}
	}
	return errClass{code: "Internal", http: http.StatusInternalServerError, grpc: codes.Internal}, false
}

// HTTPError returns the HTTP status and body for err. Unclassified errors
// are 500s whose message is hidden from the client (the caller logs it).
func HTTPError(err error) (int, ErrorBody) {
	c, known := classify(err)
	d := ErrorDetail{Code: c.code, Message: err.Error()}
	if !known {
		d.Message = "internal error"
	}
	if fes := Fields(err); fes != nil && known {
		d.Field = fes[0].Field
		d.Message = FieldErrors(fes).Error()
		for _, fe := range fes {
			if len(fes) == 1 && fe.Field == "" {
				break
			}
			d.Details = append(d.Details, FieldDetail{Field: fe.Field, Message: fe.Message})
		}
	}
	return c.http, ErrorBody{Error: d}
}

// GRPCError converts err to a gRPC status error that FromGRPC can turn back
// into the same sentinel (and field), so errors cross tiers intact.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isSentinel(err) {
		return err
	}
	c, _ := classify(err)
	st := status.New(c.grpc, err.Error())
	info := &errdetails.ErrorInfo{Reason: c.code, Domain: "strata"}
	if fes := Fields(err); fes != nil {
		info.Metadata = map[string]string{"field": fes[0].Field, "message": fes[0].Message}
		if len(fes) > 1 {
			if all, err := json.Marshal(fes); err == nil {
				info.Metadata["errors"] = string(all)
			}
		}
	}
	if withInfo, derr := st.WithDetails(info); derr == nil {
		st = withInfo
	}
	return st.Err()
}

func isSentinel(err error) bool {
	_, known := classify(err)
	return known
}

// FromGRPC turns a gRPC error back into a Strata error wrapping the right
// sentinel. Errors that are not gRPC statuses are returned unchanged.
func FromGRPC(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if e := fromDetails(st); e != nil {
		return e
	}
	if sentinel, ok := codeSentinels[st.Code()]; ok {
		return &remoteError{msg: st.Message(), sentinel: sentinel}
	}
	return err
}

// fromDetails is the error a Strata peer described in the status's
// ErrorInfo (GRPCError), nil if there is none.
func fromDetails(st *status.Status) error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != "strata" {
			continue
		}
		var all FieldErrors
		if err := json.Unmarshal([]byte(info.Metadata["errors"]), &all); err == nil && len(all) > 1 {
			return all
		}
		if f, ok := info.Metadata["field"]; ok {
			return &FieldError{Field: f, Message: info.Metadata["message"]}
		}
		for _, c := range classes {
			if c.code == info.Reason {
				return &remoteError{msg: st.Message(), sentinel: c.sentinel}
			}
		}
	}
	return nil
}

// codeSentinels are the sentinels of the gRPC codes of a peer that says
// no more (no ErrorInfo).
var codeSentinels = map[codes.Code]error{
	codes.InvalidArgument:    ErrInvalid,
	codes.NotFound:           ErrNotFound,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.Aborted:            ErrConflict,
	codes.FailedPrecondition: ErrConflict,
	codes.Unavailable:        ErrUnavailable,
	codes.Unauthenticated:    ErrUnauthenticated,
	codes.PermissionDenied:   ErrForbidden,
	codes.DeadlineExceeded:   context.DeadlineExceeded,
	codes.Canceled:           context.Canceled,
}

// remoteError is an error that came over the wire: its message is the
// remote's, and it wraps the local sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
