// Package scrape reads samples from a tier's Prometheus /metrics
// endpoint, for the tests that count what a process did (passes of a
// loop, notifications sent) rather than wait for it by the clock.
package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ErrNoSample is Sample's error when the exposition lacks the sample.
var ErrNoSample = errors.New("no such sample")

// Sample reads one sample, named with its labels as exposed (e.g.
// `strata_alerts_passes_total{tier="global"}`), from the /metrics at url
// with client (nil: http.DefaultClient). A sample absent from the
// exposition is ErrNoSample: a counter not registered is not a zero.
func Sample(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	return 0, fmt.Errorf("%s at %s: %w", name, url, ErrNoSample)
}
