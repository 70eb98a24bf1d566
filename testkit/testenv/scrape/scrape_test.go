package scrape

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestSample(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("# HELP x_total X.\n# TYPE x_total counter\nx_total{tier=\"global\"} 42\nx_total_other{tier=\"global\"} 7\ny 1.5e+06\n"))
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	for _, tc := range []struct {
		url, name string
		want      float64
		fails     bool
	}{
		{srv.URL + "/metrics", `x_total{tier="global"}`, 42, false},
		{srv.URL + "/metrics", "y", 1.5e6, false},
		{srv.URL + "/metrics", `x_total{tier="region"}`, 0, true},
		{srv.URL + "/metrics", "x", 0, true},
		{srv.URL + "/other", "y", 0, true},
	} {
		t.Run(tc.name+tc.url, func(t *testing.T) {
			got, err := Sample(ctx, nil, tc.url, tc.name)
			if (err != nil) != tc.fails || got != tc.want {
				t.Fatalf("got %v, %v; want %v (an error: %v)", got, err, tc.want, tc.fails)
			}
			if missing := tc.fails && tc.url == srv.URL+"/metrics"; missing != errors.Is(err, ErrNoSample) {
				t.Fatalf("got %v; want ErrNoSample: %v", err, missing)
			}
		})
	}
}
