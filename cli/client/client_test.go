package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

func newClient(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(Options{URL: srv.URL, Token: "tok", Tenant: "acme", RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
		code   string
		field  string
	}{
		{"the API's error body", 400, `{"error":{"code":"InvalidArgument","message":"replicas: must not be negative (got -1)","field":"replicas"}}`,
			"replicas: must not be negative (got -1) (field replicas)", "InvalidArgument", "replicas"},
		{"without a field", 404, `{"error":{"code":"NotFound","message":"resource \"web\" not found"}}`,
			`resource "web" not found`, "NotFound", ""},
		{"a proxy's page", 502, "<html>bad gateway</html>", "GET /v1/flavors: HTTP 502 Bad Gateway: <html>bad gateway</html>", "", ""},
		{"an empty body", 500, "", "GET /v1/flavors: HTTP 500 Internal Server Error", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.Flavors.List(context.Background())
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v (%T); want an *APIError", err, err)
			}
			if ae.Error() != tc.want || ae.Status != tc.status || ae.Code != tc.code || ae.Field != tc.field {
				t.Errorf("got %+v (%q); want %q, status %d, code %q, field %q", ae, ae.Error(), tc.want, tc.status, tc.code, tc.field)
			}
		})
	}
}

func TestConnError(t *testing.T) {
	addr := ports.Addr(t) // reserved: nothing listens there
	c, err := New(Options{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Regions.List(context.Background())
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T); want a *ConnError", err, err)
	}
	if !strings.HasPrefix(err.Error(), "cannot connect to http://"+addr) {
		t.Errorf("got %q; want it to say it cannot connect", err)
	}
}

func TestCancelledIsNotAConnError(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Regions.List(ctx)
	var ce *ConnError
	if errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v (%T); want a deadline error", err, err)
	}
}

func TestRequests(t *testing.T) {
	type seen struct {
		method, path, query, auth, key, ctype, body string
	}
	tests := []struct {
		name string
		call func(c *Client) error
		want seen
	}{
		{"create resource: tenant, token, idempotency key, replicas left out",
			func(c *Client) error {
				_, err := c.Resources.Create(context.Background(), ResourceWrite{Resource: api.Resource{Name: "web", Kind: api.KindCompute, Replicas: 7}})
				return err
			},
			seen{"POST", "/v1/resources", "tenant=acme", "Bearer tok", "<key>", "application/json", `{"name":"web","kind":"Compute","spec":{},"schedule":{}}`}},
		{"update resource with replicas",
			func(c *Client) error {
				n := 0
				_, err := c.Resources.Update(context.Background(), ResourceWrite{Resource: api.Resource{Name: "web", Kind: api.KindVolume}, Replicas: &n})
				return err
			},
			seen{"PUT", "/v1/resources/web", "tenant=acme", "Bearer tok", "<key>", "application/json", `{"name":"web","kind":"Volume","spec":{},"schedule":{},"replicas":0}`}},
		{"scale",
			func(c *Client) error { _, err := c.Resources.Scale(context.Background(), "web", 6); return err },
			seen{"POST", "/v1/resources/web/scale", "tenant=acme", "Bearer tok", "", "application/json", `{"replicas":6}`}},
		{"rollback",
			func(c *Client) error { _, err := c.Resources.Rollback(context.Background(), "web", 1); return err },
			seen{"POST", "/v1/resources/web/rollback", "tenant=acme", "Bearer tok", "", "application/json", `{"revision":1}`}},
		{"cordon with a reason",
			func(c *Client) error {
				_, err := c.Nodes.Cordon(context.Background(), "dev-1", "dev-1-a", "disk")
				return err
			},
			seen{"POST", "/v1/regions/dev-1/nodes/dev-1-a/cordon", "", "Bearer tok", "", "application/json", `{"reason":"disk"}`}},
		{"uncordon without a body",
			func(c *Client) error {
				_, err := c.Nodes.Uncordon(context.Background(), "dev-1", "dev-1-a")
				return err
			},
			seen{"POST", "/v1/regions/dev-1/nodes/dev-1-a/uncordon", "", "Bearer tok", "", "", ""}},
		{"drain",
			func(c *Client) error {
				_, err := c.Nodes.Drain(context.Background(), "dev-1", "dev-1-a", api.DrainRequest{Deadline: api.D(10 * time.Minute), MaxParallel: 2})
				return err
			},
			seen{"POST", "/v1/regions/dev-1/nodes/dev-1-a/drain", "", "Bearer tok", "", "application/json", `{"deadline":"10m0s","maxParallel":2}`}},
		{"nodes of a region with a selector",
			func(c *Client) error { _, err := c.Nodes.List(context.Background(), "dev-1", "zone=a"); return err },
			seen{"GET", "/v1/nodes", "limit=500&region=dev-1&selector=zone%3Da", "Bearer tok", "", "", ""}},
		{"events",
			func(c *Client) error {
				_, err := c.Events.List(context.Background(), EventQuery{Region: "dev-1", Object: "node/a", After: "dev-1=5", Limit: 10})
				return err
			},
			seen{"GET", "/v1/events", "after=dev-1%3D5&limit=10&object=node%2Fa&region=dev-1", "Bearer tok", "", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got seen
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got = seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(b)}
				if got.key != "" {
					got.key = "<key>"
				}
				io.WriteString(w, "{}")
			})
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		call     func(c *Client) error
		failures int32
		want     int32 // attempts
		ok       bool
	}{
		{"a GET rides out a 503", func(c *Client) error { _, err := c.Flavors.List(context.Background()); return err }, 1, 2, true},
		{"a keyed write is retried with the same key", func(c *Client) error {
			_, err := c.Resources.Create(context.Background(), ResourceWrite{Resource: api.Resource{Name: "x"}})
			return err
		}, 2, 3, true},
		{"a write without a key is not retried", func(c *Client) error {
			_, err := c.Flavors.Create(context.Background(), api.Flavor{Name: "x"})
			return err
		}, 1, 1, false},
		{"retries end", func(c *Client) error { _, err := c.Flavors.List(context.Background()); return err }, 10, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var attempts atomic.Int32
			keys := map[string]bool{}
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				keys[r.Header.Get("Idempotency-Key")] = true
				if attempts.Add(1) <= tc.failures {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, `{"error":{"code":"Unavailable","message":"etcd: unavailable"}}`)
					return
				}
				io.WriteString(w, `{"items":[]}`)
			})
			err := tc.call(c)
			if (err == nil) != tc.ok || attempts.Load() != tc.want {
				t.Errorf("got error %v after %d attempts; want ok %v after %d", err, attempts.Load(), tc.ok, tc.want)
			}
			if len(keys) != 1 {
				t.Errorf("got %d idempotency keys; want one for all attempts", len(keys))
			}
		})
	}
}

func TestListResourcesFollowsPages(t *testing.T) {
	var queries []string
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query().Get("continue"))
		switch r.URL.Query().Get("continue") {
		case "":
			io.WriteString(w, `{"items":[{"name":"a"},{"name":"b"}],"continue":"Yg"}`)
		case "Yg":
			io.WriteString(w, `{"items":[{"name":"c"}]}`)
		}
	})
	items, err := c.Resources.List(context.Background(), ResourceQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || items[2].Name != "c" || len(queries) != 2 {
		t.Errorf("got %d items after queries %q; want a, b, c after two pages", len(items), queries)
	}
}

func TestReadSSE(t *testing.T) {
	type ev struct{ id, data string }
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{"events, keep-alives and ids", "id: 1\ndata: {\"a\":1}\n\n: keepalive\n\nid: 2\ndata: {\"a\":2}\n\n", []ev{{"1", `{"a":1}`}, {"2", `{"a":2}`}}},
		{"data over lines", "data: line1\ndata: line2\n\n", []ev{{"", "line1\nline2"}}},
		{"an id carries over", "id: c1\ndata: x\n\ndata: y\n\n", []ev{{"c1", "x"}, {"c1", "y"}}},
		{"a last event without its blank line", "data: z", []ev{{"", "z"}}},
		{"other fields are skipped", "event: message\nretry: 100\ndata: d\n\n", []ev{{"", "d"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []ev
			err := readSSE(strings.NewReader(tc.in), func(id string, data []byte) error {
				got = append(got, ev{id, string(data)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestWatchEvents(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("got query %q, Accept %q; want watch=true and text/event-stream", r.URL.RawQuery, r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: dev-1=7\ndata: {\"id\":\"7\",\"reason\":\"Scheduled\",\"region\":\"dev-1\"}\n\n")
	})
	var got []string
	err := c.Events.Watch(context.Background(), EventQuery{After: "dev-1=6"}, func(e api.Event, cursor string) error {
		got = append(got, e.Reason+"@"+cursor)
		return nil
	})
	if !errors.Is(err, io.EOF) {
		t.Errorf("a stream the server ended: got %v; want io.EOF", err)
	}
	if fmt.Sprint(got) != "[Scheduled@dev-1=7]" {
		t.Errorf("got %v; want the event with its cursor", got)
	}
}

func TestLogs(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.RawQuery; got != "follow=true&replica=web-1&tail=5&tenant=acme" {
			t.Errorf("got query %q", got)
		}
		io.WriteString(w, "line 1\nline 2\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Resources.Logs(ctx, "web", LogQuery{Replica: "web-1", Follow: true, Tail: 5}, &out) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "line 2") {
		if time.Now().After(deadline) {
			t.Fatalf("got %q after 5s; want both lines while following", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("following stopped by the caller: got %v; want nil", err)
	}
}

// syncBuffer is written by the client's goroutine and read by the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no scheme", Options{URL: "127.0.0.1:8080"}},
		{"another scheme", Options{URL: "ftp://x"}},
		{"a CA that is not PEM", Options{URL: "https://x", CAPEM: []byte("nope")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.o); err == nil {
				t.Errorf("got no error; want one")
			}
		})
	}
}
