package hostpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a Fetcher.
const (
	DefaultMaxBytes = 4 << 30 // 4 GiB
	DefaultTimeout  = 10 * time.Minute
	// maxRedirects bounds the redirects a fetch follows, each checked
	// like the first URL.
	maxRedirects = 5
)

// URLPattern is one entry of an operator's allowlist:
// scheme://host[:port][/path-prefix]. A host "*.example.com" matches
// the subdomains of example.com (not example.com itself); a path prefix
// matches whole segments ("/images" matches /images and /images/a.tar,
// not /images2).
type URLPattern struct {
	scheme, host, port, path string
}

// ParseURLPattern parses an allowlist entry.
func ParseURLPattern(s string) (URLPattern, error) {
	u, err := url.Parse(s)
	if err != nil {
		return URLPattern{}, fmt.Errorf("%q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return URLPattern{}, fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return URLPattern{}, fmt.Errorf("%q: want scheme://host[:port][/path], without user, query or fragment", s)
	}
	if hasDotDot(u.Path) {
		return URLPattern{}, fmt.Errorf("%q: the path has a .. element", s)
	}
	return URLPattern{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: portOf(u), path: strings.TrimSuffix(u.Path, "/")}, nil
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

func (p URLPattern) matches(u *url.URL) bool {
	if u.Scheme != p.scheme || portOf(u) != p.port {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if suffix, wild := strings.CutPrefix(p.host, "*."); wild {
		if !strings.HasSuffix(host, "."+suffix) {
			return false
		}
	} else if host != p.host {
		return false
	}
	return p.path == "" || u.Path == p.path || strings.HasPrefix(u.Path, p.path+"/")
}

func (p URLPattern) String() string {
	return p.scheme + "://" + net.JoinHostPort(p.host, p.port) + p.path
}

// Fetcher downloads what tenants name by URL, only from the operator's
// allowlist: each URL, and every redirect, must match a pattern, and
// every connection's address, as resolved when it is dialled (so that
// DNS cannot answer differently for the check and for the connection),
// must be a public unicast address or in AllowNetworks (see Networks).
// A download is bounded in size and time.
type Fetcher struct {
	allow    []URLPattern
	maxBytes int64
	client   *http.Client
}

// FetcherConfig configures a Fetcher.
type FetcherConfig struct {
	// Allow is the allowlist (see URLPattern); empty allows no URL.
	Allow []string
	// AllowNetworks are CIDRs that may be reached although they are
	// loopback, private, link-local or otherwise internal (an image
	// server on the operator's own network: "10.0.5.0/24").
	AllowNetworks []string
	// MaxBytes bounds a download (default DefaultMaxBytes).
	MaxBytes int64
	// Timeout bounds a download, connection to last byte (default
	// DefaultTimeout).
	Timeout time.Duration
}

// NewFetcher checks cfg and returns its Fetcher.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	f := &Fetcher{maxBytes: cfg.MaxBytes}
	if f.maxBytes <= 0 {
		f.maxBytes = DefaultMaxBytes
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	for _, s := range cfg.Allow {
		p, err := ParseURLPattern(s)
		if err != nil {
			return nil, err
		}
		f.allow = append(f.allow, p)
	}
	nets, err := ParseNetworks(cfg.AllowNetworks)
	if err != nil {
		return nil, err
	}
	f.client = &http.Client{
		Timeout:   timeout,
		Transport: nets.Transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return f.Allowed(req.URL)
		},
	}
	return f, nil
}

// Allowed reports whether u matches the allowlist; the error says why
// not, for the log.
func (f *Fetcher) Allowed(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q", ErrNotAllowed, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: a URL with credentials", ErrNotAllowed)
	case hasDotDot(u.Path):
		return fmt.Errorf("%w: %s has a .. element", ErrNotAllowed, Redact(u))
	}
	for _, p := range f.allow {
		if p.matches(u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s matches no allowed URL", ErrNotAllowed, Redact(u))
}

// Fetch downloads src into w and returns the bytes written. Every
// refusal wraps ErrNotAllowed; the errors name the cause for the log and
// never the URL's credentials or query.
func (f *Fetcher) Fetch(ctx context.Context, src string, w io.Writer) (int64, error) {
	u, err := url.Parse(src)
	if err != nil {
		return 0, fmt.Errorf("%w: not a URL", ErrNotAllowed)
	}
	if err := f.Allowed(u); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNotAllowed, err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		// The url.Error repeats the URL with its query: name it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("%w: get %s: %v", ErrNotAllowed, Redact(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: get %s: %s", ErrNotAllowed, Redact(u), resp.Status)
	}
	if resp.ContentLength > f.maxBytes {
		return 0, fmt.Errorf("%w: %s is %d bytes, more than the %d allowed", ErrNotAllowed, Redact(u), resp.ContentLength, f.maxBytes)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, f.maxBytes+1))
	if err != nil {
		return n, fmt.Errorf("%w: get %s: %v", ErrNotAllowed, Redact(u), err)
	}
	if n > f.maxBytes {
		return n, fmt.Errorf("%w: %s is more than the %d bytes allowed", ErrNotAllowed, Redact(u), f.maxBytes)
	}
	return n, nil
}

// Redact writes u without user information, query or fragment, which
// may carry credentials.
func Redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment, c.RawFragment = nil, "", "", ""
	return c.String()
}
