package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// ListEvents serves a fake region's events: n of them, ids "1000-i",
// one a second, oldest first; after an id, those that follow it; without
// one, the newest.
func (f *fakeRegion) ListEvents(_ context.Context, req *regionv1.ListEventsRequest) (*regionv1.ListEventsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("ListEvents " + req.GetAfter())
	limit := int(req.GetLimit())
	var evs []*resourcev1.Event
	for i := range f.events {
		id := fmt.Sprintf("1000-%d", i)
		if req.GetAfter() != "" && i <= eventSeq(req.GetAfter()) {
			continue
		}
		evs = append(evs, &resourcev1.Event{Id: id, Type: "Normal", Reason: "Test", Object: "node/n1", Region: f.name,
			Time: timestamppb.New(time.Unix(int64(1000+10*i), 0))})
	}
	if len(evs) > limit {
		if req.GetAfter() == "" {
			evs = evs[len(evs)-limit:]
		} else {
			evs = evs[:limit]
		}
	}
	return &regionv1.ListEventsResponse{Items: evs}, nil
}

func eventSeq(id string) int {
	var ms, seq int
	if _, err := fmt.Sscanf(id, "%d-%d", &ms, &seq); err != nil {
		return -1
	}
	return seq
}

// pages follows path's pages of limit items, returning each page's
// items' keys.
func (e *testEnv) pages(t *testing.T, path string, limit int, key func(map[string]any) string) [][]string {
	t.Helper()
	var out [][]string
	cont := ""
	for range 100 {
		u := fmt.Sprintf("%s%slimit=%d", path, sep(path), limit)
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		page := decodeAs[struct {
			Items    []map[string]any
			Continue string
		}](t, e.must(t, http.StatusOK, e.do(t, "GET", u, nil)))
		var keys []string
		for _, it := range page.Items {
			keys = append(keys, key(it))
		}
		out = append(out, keys)
		if page.Continue == "" {
			return out
		}
		cont = page.Continue
	}
	t.Fatalf("%s: more than 100 pages", path)
	return nil
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// TestPagination pages every list (resources, flavors, nodes, tokens,
// events) with limit and continue: the pages hold every item once, in
// order, none more than limit; bad limits, tokens, cursors and filters
// are 400s naming the parameter, an unknown region a 404.
func TestPagination(t *testing.T) {
	e := newEnv(t, envConfig{})
	eu := newFakeRegion("eu", "n1", "n2", "n3", "n4", "n5")
	eu.events = 7
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki)})
	poll(t, "region reachable", func() error {
		if r := e.do(t, "GET", "/v1/nodes", nil); len(decodeAs[NodeList](t, r).Items) != 5 {
			return errors.New("got " + r.String() + "; want 5 nodes")
		}
		return nil
	})
	for i := range 7 {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody(fmt.Sprintf("app-%d", i))))
		e.token(t, DefaultTenant, api.RoleViewer)
	}
	name := func(m map[string]any) string { return fmt.Sprint(m["name"]) }
	lists := []struct {
		path string
		key  func(map[string]any) string
		want int
	}{
		{"/v1/resources", name, 7},
		{"/v1/flavors", name, 3},
		{"/v1/nodes", func(m map[string]any) string { return fmt.Sprint(m["region"], "/", m["name"]) }, 5},
		{"/v1/nodes?region=eu&selector=pool%3Da", name, 5},
		{"/v1/tokens", func(m map[string]any) string { return fmt.Sprint(m["id"]) }, 8},
	}
	for _, l := range lists {
		t.Run(l.path, func(t *testing.T) {
			pages := e.pages(t, l.path, 2, l.key)
			all := slices.Concat(pages...)
			if len(all) != l.want || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != len(all) {
				t.Errorf("got pages %q; want %d items, sorted, each once", pages, l.want)
			}
			for _, p := range pages[:len(pages)-1] {
				if len(p) != 2 {
					t.Errorf("got pages %q; want 2 items on every page but the last", pages)
				}
			}
		})
	}
	t.Run("events", func(t *testing.T) {
		first := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?limit=3", nil)))
		if len(first.Items) != 3 || first.Items[2].ID != "1000-6" || first.Continue == "" {
			t.Fatalf("got %+v; want the 3 newest events and a continue", first)
		}
		// From the start of one region's stream: pages of 3 after 1000-0.
		var ids []string
		cont := "eu=1000-0"
		for range 10 {
			page := decodeAs[EventList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?limit=3&continue="+url.QueryEscape(cont), nil)))
			for _, ev := range page.Items {
				ids = append(ids, ev.ID)
			}
			if page.Continue == "" {
				break
			}
			cont = page.Continue
		}
		if want := []string{"1000-1", "1000-2", "1000-3", "1000-4", "1000-5", "1000-6"}; !slices.Equal(ids, want) {
			t.Errorf("got events %q; want %q", ids, want)
		}
	})

	bad := []struct {
		path     string
		wantCode int
		field    string
	}{
		{"/v1/resources?limit=-5", 400, "limit"},
		{"/v1/resources?limit=ten", 400, "limit"},
		{"/v1/resources?continue=garbage", 400, "continue"},
		{"/v1/resources?kind=Widget", 400, "kind"},
		{"/v1/resources?selector=a%3D%3D%3D", 400, "selector"},
		{"/v1/flavors?limit=-1", 400, "limit"},
		{"/v1/flavors?continue=garbage", 400, "continue"},
		{"/v1/tokens?limit=-1", 400, "limit"},
		{"/v1/tokens?continue=Zm9v", 400, "continue"},
		{"/v1/nodes?limit=-5", 400, "limit"},
		{"/v1/nodes?continue=%00", 400, "continue"},
		{"/v1/nodes?region=mars", 404, ""},
		{"/v1/nodes?region=Not_A_Name", 400, "region"},
		{"/v1/events?after=garbage", 400, "after"},
		{"/v1/events?after=1000-1", 400, "after"},
		{"/v1/events?after=eu%3Dnope", 400, "after"},
		{"/v1/events?limit=-5", 400, "limit"},
		{"/v1/events?region=mars", 404, ""},
		{"/v1/events?object=a%1bb", 400, "object"},
	}
	for _, b := range bad {
		t.Run(b.path, func(t *testing.T) {
			r := e.do(t, "GET", b.path, nil)
			if r.code != b.wantCode {
				t.Fatalf("got %s; want %d", r, b.wantCode)
			}
			if got := decodeAs[api.ErrorBody](t, r).Error.Field; got != b.field {
				t.Errorf("got field %q; want %q (%s)", got, b.field, r)
			}
		})
	}
	t.Run("one region's event id with region", func(t *testing.T) {
		e.must(t, http.StatusOK, e.do(t, "GET", "/v1/events?region=eu&after=1000-1", nil))
	})
}

// TestSelectorFromIndex checks lists with selectors, served from the
// label index, against the same selection made by hand, across tenants
// and label changes (the index follows the watch).
func TestSelectorFromIndex(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	type res struct {
		tenant, name string
		labels       map[string]string
	}
	var all []res
	for i := range 30 {
		r := res{tenant: []string{"default", "other"}[i%2], name: fmt.Sprintf("r-%02d", i),
			labels: map[string]string{"app": []string{"web", "db", "cache"}[i%3], "tier": fmt.Sprint(i % 4)}}
		if i%5 == 0 {
			r.labels["canary"] = ""
		}
		all = append(all, r)
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant="+r.tenant, computeBody(r.name, func(m map[string]any) { m["labels"] = r.labels })))
	}
	// Relabel a few: the index must drop their old terms.
	for i := 0; i < 30; i += 7 {
		all[i].labels = map[string]string{"app": "moved"}
		e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/"+all[i].name+"?tenant="+all[i].tenant,
			computeBody(all[i].name, func(m map[string]any) { m["labels"] = all[i].labels })))
	}
	for _, tenant := range []string{"default", "other"} {
		for _, selector := range []string{"app=web", "app=web,tier=1", "app==db", "canary", "canary=", "app=moved", "app!=web", "!canary", "app in (web,db),tier", "app=nothing", "tier=2,app notin (db)"} {
			sel, err := api.ParseSelector(selector)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range all {
				if r.tenant == tenant && sel.Matches(r.labels) {
					want = append(want, r.name)
				}
			}
			got := slices.Concat(e.pages(t, "/v1/resources?tenant="+tenant+"&selector="+url.QueryEscape(selector), 3,
				func(m map[string]any) string { return fmt.Sprint(m["name"]) })...)
			if !slices.Equal(got, want) {
				t.Errorf("tenant %s, selector %q: got %q; want %q", tenant, selector, got, want)
			}
		}
	}
}

// Logs streams a fake replica's output: two lines, then with follow
// nothing more until the caller leaves.
func (f *fakeRegion) Logs(req *resourcev1.LogsRequest, s grpc.ServerStreamingServer[resourcev1.LogChunk]) error {
	f.mu.Lock()
	f.logsReqs = append(f.logsReqs, req)
	f.mu.Unlock()
	if !req.GetFollow() {
		return s.Send(&resourcev1.LogChunk{Data: []byte("one\ntwo\n")})
	}
	<-s.Context().Done()
	return nil
}

// TestLogsHeaders checks the logs endpoint's answer: text/plain, and with
// follow=true the headers as soon as the stream is open, before any line.
func TestLogsHeaders(t *testing.T) {
	e := newEnv(t, envConfig{})
	eu := newFakeRegion("eu", "n1")
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki)})
	res := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources",
		computeBody("web", func(m map[string]any) { m["schedule"] = map[string]any{"regions": []map[string]any{{"name": "eu"}}} }))))
	eu.mu.Lock()
	eu.replicas = append(eu.replicas, api.Replica{Assignment: api.Assignment{ID: "web-0", Tenant: DefaultTenant, Resource: "web",
		ResourceUID: res.UID, Kind: api.KindCompute, Node: "n1", Desired: api.DesiredRunning}, Region: "eu", Phase: api.PhaseReady})
	eu.mu.Unlock()
	poll(t, "region reachable", func() error {
		if r := e.do(t, "GET", "/v1/resources/web/replicas", nil); len(decodeAs[ReplicaList](t, r).Items) != 1 {
			return errors.New("got " + r.String())
		}
		return nil
	})

	r := e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/logs", nil))
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || string(r.body) != "one\ntwo\n" {
		t.Errorf("got Content-Type %q, body %q; want text/plain and the two lines", ct, r.body)
	}

	// A pod container is passed on to the region; a name that is no DNS
	// label is refused at the edge, naming the parameter.
	e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/web/logs?container=sidecar&tail=5", nil))
	eu.mu.Lock()
	last := eu.logsReqs[len(eu.logsReqs)-1]
	eu.mu.Unlock()
	if last.GetContainer() != "sidecar" || last.GetReplica() != "web-0" || last.GetTailLines() != 5 {
		t.Errorf("region got %v; want container sidecar of replica web-0, tail 5", last)
	}
	for _, bad := range []string{"Side_car", "-x", strings.Repeat("a", 64)} {
		got := decodeAs[api.ErrorBody](t, e.must(t, http.StatusBadRequest, e.do(t, "GET", "/v1/resources/web/logs?container="+bad, nil))).Error
		if got.Field != "container" {
			t.Errorf("container %q: got %+v; want a 400 naming container", bad, got)
		}
	}

	// Following an idle log: the answer's headers come at once, though
	// no line ever does.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/resources/web/logs?follow=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("got %v; want the headers before any line", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("got %d %q; want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
