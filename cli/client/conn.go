package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/backoff"
)

// retryAttempts bounds the tries of a request that is safe to repeat when
// the server answers 503 (a replica that lost etcd, a cache catching up).
const retryAttempts = 3

// conn is the connection to the server every kind of object's client
// shares: the URL, the token, the tenant it acts in, and the HTTP client.
// It owns sending a request, retrying what is safe to retry, and turning
// failures into *APIError and *ConnError.
type conn struct {
	base    *url.URL
	token   string
	tenant  string
	timeout time.Duration
	agent   string
	backoff time.Duration
	http    *http.Client
}

// request is one call.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	// idempotencyKey makes a write safe to retry (the API replays it).
	idempotencyKey string
	// stream means no per-request timeout: the caller reads the body for as
	// long as its context lives.
	stream bool
	accept string
}

// NewIdempotencyKey returns a fresh key for one logical write.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}

// do sends r and decodes a JSON reply into out (unless nil).
func (c *conn) do(ctx context.Context, r request, out any) error {
	resp, cancel, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.transportErr(ctx, err)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the reply: %w", r.method, r.path, err)
	}
	return nil
}

// send returns a 2xx response, retrying 503s of safe requests; the caller
// closes the body and then calls cancel.
func (c *conn) send(ctx context.Context, r request) (*http.Response, context.CancelFunc, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, nil, fmt.Errorf("encoding the request: %w", err)
		}
	}
	// A stream is not retried here: its caller resumes it from its cursor.
	safe := (r.method == http.MethodGet || r.idempotencyKey != "") && !r.stream
	// Doubling from c.backoff; retryAttempts stops it before any cap.
	retry := backoff.Backoff{Min: c.backoff, Max: c.backoff << retryAttempts}
	for attempt := 1; ; attempt++ {
		resp, cancel, err := c.sendOnce(ctx, r, body)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode < 300 {
			return resp, cancel, nil
		}
		apiErr := readAPIError(resp)
		resp.Body.Close()
		cancel()
		if !safe || resp.StatusCode != http.StatusServiceUnavailable || attempt == retryAttempts {
			return nil, nil, apiErr
		}
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return nil, nil, apiErr
		}
	}
}

func (c *conn) sendOnce(ctx context.Context, r request, body []byte) (*http.Response, context.CancelFunc, error) {
	u := *c.base
	u.Path = c.base.Path + r.path
	u.RawQuery = r.query.Encode()
	cancel := context.CancelFunc(func() {})
	if !r.stream {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), rd)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("building the request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		err = c.transportErr(ctx, err) // before cancel, which would make every error look cancelled
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// stream sends the streaming request r and hands its body to read. A ctx
// done (Ctrl-C) before the first byte or while reading is a clean stop:
// nil, whatever read returned.
func (c *conn) stream(ctx context.Context, r request, read func(body io.Reader) error) error {
	resp, cancel, err := c.send(ctx, r)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	if err := read(resp.Body); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// transportErr keeps a cancelled or timed-out context recognisable and
// calls everything else a connection failure.
func (c *conn) transportErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s did not answer in time: %w", c.base, context.DeadlineExceeded)
		}
		return context.Canceled
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &ConnError{URL: c.base.String(), Err: err}
}

// readAPIError turns a non-2xx reply into an *APIError, whatever its body.
func readAPIError(resp *http.Response) *APIError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		return e
	}
	// Not the API's body: a proxy, or a route this server does not have.
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	e.Message = fmt.Sprintf("%s %s: HTTP %s", resp.Request.Method, resp.Request.URL.Path, resp.Status)
	if msg != "" {
		e.Message += ": " + msg
	}
	return e
}

// tenantQuery returns the query of a resource route.
func (c *conn) tenantQuery() url.Values {
	q := url.Values{}
	if c.tenant != "" {
		q.Set("tenant", c.tenant)
	}
	return q
}

// escape makes a name safe as one path segment.
func escape(name string) string { return url.PathEscape(name) }
