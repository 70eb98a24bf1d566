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
// check (unless WithHTTPKeepAlive), a status from 200 to 399 passes, redirects to
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

	// keepAlive keeps a check's connection for the next one
	// (WithHTTPKeepAlive); keepRequest is then the GET of url without
	// Connection: close, idle the connection kept and idleBR its reader.
	// Only the worker's goroutine uses them.
	keepAlive   bool
	keepRequest []byte
	idle        net.Conn
	idleBR      *bufio.Reader
}

func newHTTPProber(a *api.HTTPGetAction, host, userAgent string, dial Dialer, keepAlive bool) (*httpProber, error) {
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
	h := &httpProber{dial: dial, url: u, header: http.Header{}, ua: userAgent, keepAlive: keepAlive}
	for _, hd := range a.HTTPHeaders {
		h.header.Add(hd.Name, hd.Value)
	}
	if h.request, err = h.build(u, true); err != nil {
		return nil, fmt.Errorf("httpGet: %w", err)
	}
	if keepAlive {
		if h.keepRequest, err = h.build(u, false); err != nil {
			return nil, fmt.Errorf("httpGet: %w", err)
		}
	}
	// A probe checks that the server answers, not who it is: Kubernetes
	// does not verify the certificate either.
	h.tls = &tls.Config{InsecureSkipVerify: true}
	if net.ParseIP(u.Hostname()) == nil {
		h.tls.ServerName = u.Hostname()
	}
	return h, nil
}

// build writes the request for u: the probe's headers, a Host header
// among them setting the virtual host, a User-Agent and an Accept that
// they may override, and Connection: close unless keep.
func (h *httpProber) build(u *url.URL, closeConn bool) ([]byte, error) {
	req := &http.Request{
		Method: http.MethodGet, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header.Clone(), Host: u.Host, Close: closeConn,
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
		if req, err = h.build(next, true); err != nil {
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
// response's status and Location. With keep-alive, the first request of
// a check goes on the connection the last check left open, if any.
func (h *httpProber) roundTrip(ctx context.Context, u *url.URL, req []byte) (int, string, error) {
	if h.keepAlive && u == h.url {
		return h.roundTripKept(ctx)
	}
	conn, err := h.connect(ctx, u)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = conn.Close() }()
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	r, err := exchange(conn, br, req)
	return r.status, r.location, err
}

// connect dials u's host (and shakes hands for https), the connection's
// deadline the check's.
func (h *httpProber) connect(ctx context.Context, u *url.URL) (net.Conn, error) {
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
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, h.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}
	return conn, nil
}

// exchange writes a request and reads its response.
func exchange(conn net.Conn, br *bufio.Reader, req []byte) (response, error) {
	if _, err := conn.Write(req); err != nil {
		return response{}, err
	}
	return readResponse(br)
}

// roundTripKept makes the check's request on the connection the last
// check left open, else on a new one that it keeps when the response
// allows. A kept connection that fails is closed and the request made
// again on a new one: a server may close an idle connection at any
// time, and only a new connection says whether the server is down.
func (h *httpProber) roundTripKept(ctx context.Context) (int, string, error) {
	if h.idle != nil {
		if dl, ok := ctx.Deadline(); ok {
			_ = h.idle.SetDeadline(dl)
		}
		r, err := exchange(h.idle, h.idleBR, h.keepRequest)
		if err == nil && r.reusable {
			return r.status, r.location, nil
		}
		h.close()
		if err == nil {
			return r.status, r.location, nil
		}
	}
	conn, err := h.connect(ctx, h.url)
	if err != nil {
		return 0, "", err
	}
	br := bufio.NewReaderSize(conn, 4096)
	r, err := exchange(conn, br, h.keepRequest)
	if err == nil && r.reusable {
		h.idle, h.idleBR = conn, br
	} else {
		_ = conn.Close()
	}
	return r.status, r.location, err
}

// close closes the kept connection; the worker calls it when it ends.
func (h *httpProber) close() {
	if h.idle != nil {
		_ = h.idle.Close()
		h.idle, h.idleBR = nil, nil
	}
}
