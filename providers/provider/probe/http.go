package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// maxRedirects is how many redirects to the same host a check follows,
// as Go's HTTP client (which the kubelet uses) does.
const maxRedirects = 10

// httpProber makes a GET with Kubernetes' semantics: a new connection per
// check (no keep-alive), a status from 200 to 399 passes, redirects to
// the same host are followed, one to another host passes unfollowed, at
// most maxBody of the body is read, the certificate of an https server
// is not verified.
//
// It speaks HTTP/1.1 on the connection itself rather than through
// net/http's Transport: the request is built once, and a check costs a
// dial, one write and the parse of the response, with no goroutines of
// a Transport's connection (the P1 budget is 500 checks a second in 5 %
// of a core).
type httpProber struct {
	dial    Dialer
	url     *url.URL
	header  http.Header // the probe's headers, for the requests of redirects
	ua      string
	request []byte // the GET of url, built once
	tls     *tls.Config
}

func newHTTPProber(a *api.HTTPGetAction, host, userAgent string, dial Dialer) (*httpProber, error) {
	if a.Host != "" {
		host = a.Host
	}
	if host == "" {
		return nil, errors.New("httpGet: the target has no host and the probe names none")
	}
	u, err := url.Parse(string(a.Scheme) + "://" + net.JoinHostPort(host, strconv.Itoa(a.Port)) + a.Path)
	if err != nil {
		return nil, fmt.Errorf("httpGet: %w", err)
	}
	h := &httpProber{dial: dial, url: u, header: http.Header{}, ua: userAgent}
	for _, hd := range a.HTTPHeaders {
		h.header.Add(hd.Name, hd.Value)
	}
	if h.request, err = h.build(u); err != nil {
		return nil, fmt.Errorf("httpGet: %w", err)
	}
	// A probe checks that the server answers, not who it is: Kubernetes
	// does not verify the certificate either.
	h.tls = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	if net.ParseIP(u.Hostname()) == nil {
		h.tls.ServerName = u.Hostname()
	}
	return h, nil
}

// build writes the request for u: the probe's headers, a Host header
// among them setting the virtual host, a User-Agent and an Accept that
// they may override, and Connection: close.
func (h *httpProber) build(u *url.URL) ([]byte, error) {
	req := &http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header.Clone(), Host: u.Host, Close: true,
	}
	if v := req.Header.Get("Host"); v != "" {
		req.Host = v
		req.Header.Del("Host")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", h.ua)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (h *httpProber) probe(ctx context.Context) (Result, string) {
	u, req := h.url, h.request
	for redirects := 0; ; redirects++ {
		status, location, err := h.roundTrip(ctx, u, req)
		if err != nil {
			return Failure, fmt.Sprintf("Get %q: %v", u, err)
		}
		if status < 300 || status >= 400 || location == "" {
			return httpResult(status)
		}
		next, err := u.Parse(location)
		if err != nil || next.Scheme != "http" && next.Scheme != "https" {
			return httpResult(status)
		}
		if next.Hostname() != h.url.Hostname() {
			return Success, fmt.Sprintf("Probe terminated redirects to %s (status %d)", api.Clip(next.String()), status)
		}
		if redirects == maxRedirects {
			return Failure, fmt.Sprintf("Get %q: stopped after %d redirects", u, maxRedirects)
		}
		if req, err = h.build(next); err != nil {
			return Failure, fmt.Sprintf("Get %q: %v", next, err)
		}
		u = next
	}
}

func httpResult(status int) (Result, string) {
	if status >= 200 && status < 400 {
		return Success, ""
	}
	return Failure, "HTTP probe failed with statuscode: " + strconv.Itoa(status)
}

// readers are the response readers of the checks under way.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// roundTrip makes one request on a new connection and returns the
// response's status and Location.
func (h *httpProber) roundTrip(ctx context.Context, u *url.URL, req []byte) (int, string, error) {
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	conn, err := h.dial(ctx, "tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = conn.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, h.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, "", err
		}
		conn = tc
	}
	if _, err := conn.Write(req); err != nil {
		return 0, "", err
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	return readResponse(br)
}
