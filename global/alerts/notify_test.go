package alerts

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestSignVerify: the signature covers the timestamp and the body (the
// value checked with openssl: printf '%s' '1718000000.{"version":"1"}' |
// openssl dgst -sha256 -hmac <secret>); it verifies with its timestamp,
// and not with another timestamp, body or secret, nor outside the
// tolerance.
func TestSignVerify(t *testing.T) {
	secret, ts, body := []byte("a-secret-of-the-receiver-0123"), "1718000000", []byte(`{"version":"1"}`)
	sig := Sign(secret, ts, body)
	if want := "v1=177a08b18bba84add36c6451ac31e06e4db36b684b933baad59a568b9b377567"; sig != want {
		t.Fatalf("Sign: got %s; want %s", sig, want)
	}
	at := time.Unix(1718000000, 0)
	tests := []struct {
		name      string
		secret    []byte
		ts, sig   string
		body      []byte
		now       time.Time
		wantError error
	}{
		{"as signed", secret, ts, sig, body, at, nil},
		{"within the tolerance", secret, ts, sig, body, at.Add(SignatureTolerance), nil},
		{"a receiver's clock behind", secret, ts, sig, body, at.Add(-SignatureTolerance), nil},
		{"another timestamp", secret, "1718000001", sig, body, at, ErrBadSignature},
		{"another body", secret, ts, sig, []byte(`{"version":"2"}`), at, ErrBadSignature},
		{"another secret", []byte("another-secret-0123456789"), ts, sig, body, at, ErrBadSignature},
		{"the body-only signature", secret, ts, "sha256=" + sig[3:], body, at, ErrBadSignature},
		{"replayed later", secret, ts, sig, body, at.Add(SignatureTolerance + time.Second), ErrStaleTimestamp},
		{"from the future", secret, ts, sig, body, at.Add(-SignatureTolerance - time.Second), ErrStaleTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.ts, tt.sig, tt.body, tt.now, SignatureTolerance)
			if !errors.Is(err, tt.wantError) || (tt.wantError == nil) != (err == nil) {
				t.Fatalf("Verify: got %v; want %v", err, tt.wantError)
			}
		})
	}
	// A timestamp that is not Unix seconds fails even when signed.
	if err := Verify(secret, "soon", Sign(secret, "soon", body), body, at, SignatureTolerance); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("Verify of a signed non-number timestamp: got %v; want ErrStaleTimestamp", err)
	}
}

// TestSendSignsTimestampAndBody: a post carries its timestamp (the
// sender's clock) and a signature of that timestamp and the raw body,
// which VerifyRequest takes; the same post with another timestamp is
// refused. The Alertmanager body is signed the same way.
func TestSendSignsTimestampAndBody(t *testing.T) {
	const secret = "a-secret-of-the-receiver-0123"
	type post struct {
		h    http.Header
		body []byte
	}
	posts := make(chan post, 2)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- post{r.Header.Clone(), b}
	}))
	t.Cleanup(hook.Close)
	now := time.Now().Truncate(time.Second)
	s := Sender{Client: hook.Client(), Clock: func() time.Time { return now }}
	for _, typ := range []api.ReceiverType{api.ReceiverWebhook, api.ReceiverAlertmanager} {
		rule := nodeRule()
		rule.Receiver = api.AlertReceiver{Type: typ, URL: hook.URL, Secret: secret}
		if err := s.Send(t.Context(), rule, []Alert{{Name: "NodeDown", Object: "node/n1", Status: StatusFiring, StartsAt: now}}); err != nil {
			t.Fatalf("%s: Send: %v", typ, err)
		}
		p := <-posts
		if got, want := p.h.Get(HeaderTimestamp), strconv.FormatInt(now.Unix(), 10); got != want {
			t.Fatalf("%s: %s: got %q; want %q", typ, HeaderTimestamp, got, want)
		}
		if err := VerifyRequest([]byte(secret), p.h, p.body); err != nil {
			t.Fatalf("%s: VerifyRequest: %v", typ, err)
		}
		p.h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10))
		if err := VerifyRequest([]byte(secret), p.h, p.body); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s: VerifyRequest with a changed timestamp: got %v; want ErrBadSignature", typ, err)
		}
	}
}
