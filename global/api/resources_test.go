package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

func TestCreateGetList(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, map[string]string{"eu": "127.0.0.1:1"})

	t.Run("create fills in what the server owns", func(t *testing.T) {
		body := computeBody("app", func(m map[string]any) {
			m["labels"] = map[string]string{"tier": "web"}
			m["schedule"] = map[string]any{"regions": []any{map[string]any{"name": "eu"}}}
		})
		r := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", body)))
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(r.UID) {
			t.Errorf("got uid %q; want 32 hex digits", r.UID)
		}
		checks := []struct {
			what      string
			got, want any
		}{
			{"tenant", r.Tenant, DefaultTenant},
			{"replicas (absent: the kind's default)", r.Replicas, 1},
			{"generation", r.Generation, int64(1)},
			{"revision", r.Revision, int64(1)},
			{"maxRevisionHistory default", r.MaxRevisionHistory, api.DefaultRevisionHistory},
			{"restartPolicy default", r.Spec.Compute.RestartPolicy, api.RestartAlways},
			{"schedule weight default", r.Schedule.Regions[0].Weight, 1},
			{"status phase", r.Status != nil && r.Status.Phase == api.PhaseCreated, true},
			{"resourceVersion set", r.ResourceVersion > 0, true},
			{"createdAt set", !r.CreatedAt.IsZero(), true},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %v; want %v", c.what, c.got, c.want)
			}
		}

		got := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil)))
		if got.UID != r.UID || got.ResourceVersion != r.ResourceVersion || got.Status == nil || got.Status.UID != r.UID {
			t.Fatalf("got %+v; want the created resource with its status", got)
		}
		revs := decodeAs[rest.List[api.Revision]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app/revisions", nil)))
		if len(revs.Items) != 1 || revs.Items[0].Cause != "create" || revs.Items[0].FlavorSpec == nil || revs.Items[0].FlavorSpec.MemoryMiB != 256 {
			t.Fatalf("got revisions %+v; want revision 1 (create) with the flavor's spec", revs.Items)
		}
	})

	t.Run("replicas given as 0 stay 0", func(t *testing.T) {
		r := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources",
			computeBody("idle", func(m map[string]any) { m["replicas"] = 0 }))))
		if r.Replicas != 0 {
			t.Fatalf("got %d replicas; want 0", r.Replicas)
		}
	})

	t.Run("other kinds", func(t *testing.T) {
		for _, body := range []string{
			`{"name":"base","kind":"Image","spec":{"image":{"ref":"docker.io/library/alpine:3"}}}`,
			`{"name":"data","kind":"Volume","spec":{"volume":{"sizeMiB":1024}}}`,
			`{"name":"front","kind":"Loadbalancer","spec":{"loadbalancer":{"listeners":[{"port":80}],"selector":{"tier":"web"}}}}`,
			// A compute image naming an Image resource of the tenant.
			`{"name":"vm1","kind":"Compute","spec":{"flavor":"vmx","compute":{"image":"base"}}}`,
		} {
			e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", body))
		}
	})

	// 250 more, to page through.
	for i := range 250 {
		tier := "web"
		if i%2 == 1 {
			tier = "db"
		}
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody(fmt.Sprintf("r%03d", i), func(m map[string]any) {
			m["labels"] = map[string]string{"tier": tier}
		})))
	}

	pages := func(t *testing.T, query string) (names []string, pageSizes []int) {
		t.Helper()
		cont := ""
		for range 100 {
			q := query + "&continue=" + url.QueryEscape(cont)
			page := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?"+q, nil)))
			pageSizes = append(pageSizes, len(page.Items))
			for _, r := range page.Items {
				names = append(names, r.Name)
			}
			if cont = page.Continue; cont == "" {
				return names, pageSizes
			}
		}
		t.Fatal("more than 100 pages")
		return nil, nil
	}
	tests := []struct {
		name      string
		query     string
		wantNames int
		wantPages []int
	}{
		{"all, 3 pages of 100", "selector=tier&limit=100", 251, []int{100, 100, 51}},
		{"selector", "selector=tier%3Dweb&limit=100", 126, []int{100, 26}},
		{"labelSelector synonym", "labelSelector=tier%3Ddb", 125, []int{100, 25}},
		{"set selector", "selector=tier+in+(web,db)&limit=1000", 251, []int{251}},
		{"kind", "kind=Volume", 1, []int{1}},
		{"default limit", "", 256, []int{100, 100, 56}},
		{"limit above the maximum is cut", "limit=5000", 256, []int{256}},
	}
	for _, tt := range tests {
		t.Run("list "+tt.name, func(t *testing.T) {
			names, sizes := pages(t, tt.query)
			if !slices.Equal(sizes, tt.wantPages) {
				t.Errorf("got pages of %v; want %v", sizes, tt.wantPages)
			}
			if len(names) != tt.wantNames {
				t.Errorf("got %d names; want %d", len(names), tt.wantNames)
			}
			if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
				t.Errorf("got names out of order or duplicated: %v", names)
			}
		})
	}

	t.Run("list joins status", func(t *testing.T) {
		page := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources?limit=3", nil)))
		for _, r := range page.Items {
			if r.Status == nil || r.Status.Phase != api.PhaseCreated || r.ResourceVersion == 0 {
				t.Fatalf("got %s with status %+v, version %d; want its status and version", r.Name, r.Status, r.ResourceVersion)
			}
		}
	})

	t.Run("lists are per tenant", func(t *testing.T) {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources?tenant=acme", computeBody("theirs")))
		acme := e.token(t, "acme", api.RoleViewer)
		page := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil, withToken(acme))))
		if len(page.Items) != 1 || page.Items[0].Name != "theirs" || page.Items[0].Tenant != "acme" {
			t.Fatalf("got %d items; want only acme's resource", len(page.Items))
		}
	})
}

// TestUpdateRevisions walks a resource through updates, history pruning
// and a rollback.
func TestUpdateRevisions(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	image := func(img string) func(map[string]any) {
		return func(m map[string]any) { m["spec"].(map[string]any)["compute"] = map[string]any{"image": img} }
	}
	history := func(m map[string]any) { m["maxRevisionHistory"] = 3 }
	e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app", history, func(m map[string]any) { m["replicas"] = 3 })))

	put := func(t *testing.T, mods ...func(map[string]any)) api.Resource {
		t.Helper()
		return decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/app", computeBody("app", append([]func(map[string]any){history}, mods...)...))))
	}
	revisions := func(t *testing.T) []int64 {
		t.Helper()
		revs := decodeAs[rest.List[api.Revision]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app/revisions", nil)))
		var n []int64
		for _, r := range revs.Items {
			n = append(n, r.Number)
		}
		return n
	}

	var last api.Resource
	steps := []struct {
		name           string
		run            func(t *testing.T) api.Resource
		wantRevision   int64
		wantGeneration int64
		wantRevisions  []int64
	}{
		{
			name:         "spec change makes revision 2",
			run:          func(t *testing.T) api.Resource { return put(t, image("busybox:1.36")) },
			wantRevision: 2, wantGeneration: 2, wantRevisions: []int64{1, 2},
		},
		{
			name: "label change bumps the generation only",
			run: func(t *testing.T) api.Resource {
				return put(t, image("busybox:1.36"), func(m map[string]any) { m["labels"] = map[string]string{"a": "b"} })
			},
			wantRevision: 2, wantGeneration: 3, wantRevisions: []int64{1, 2},
		},
		{
			name: "no change writes nothing",
			run: func(t *testing.T) api.Resource {
				r := put(t, image("busybox:1.36"), func(m map[string]any) { m["labels"] = map[string]string{"a": "b"} })
				if r.ResourceVersion != last.ResourceVersion {
					t.Errorf("got resourceVersion %d; want %d (no write)", r.ResourceVersion, last.ResourceVersion)
				}
				return r
			},
			wantRevision: 2, wantGeneration: 3, wantRevisions: []int64{1, 2},
		},
		{
			name: "absent replicas are kept",
			run: func(t *testing.T) api.Resource {
				r := put(t, image("busybox:1.36"), func(m map[string]any) { m["labels"] = map[string]string{"a": "b"} })
				if r.Replicas != 3 {
					t.Errorf("got %d replicas; want 3 kept", r.Replicas)
				}
				return r
			},
			wantRevision: 2, wantGeneration: 3, wantRevisions: []int64{1, 2},
		},
		{
			name: "pin revision 1, then updates prune the oldest unpinned",
			run: func(t *testing.T) api.Resource {
				if _, err := e.st.Revisions.Modify(t.Context(), state.RevisionName(DefaultTenant, "app", 1), func(r *api.Revision) error {
					r.Pinned = true
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				for _, img := range []string{"busybox:1.37", "busybox:1.38", "busybox:1.39"} {
					put(t, image(img))
				}
				return put(t, image("busybox:1.40"))
			},
			// 1 pinned (not counted) + the 3 newest.
			wantRevision: 6, wantGeneration: 7, wantRevisions: []int64{1, 4, 5, 6},
		},
		{
			name: "conditional update at the current version",
			run: func(t *testing.T) api.Resource {
				return put(t, image("busybox:1.40"), func(m map[string]any) {
					m["resourceVersion"] = last.ResourceVersion
					m["replicas"] = 4
				})
			},
			wantRevision: 6, wantGeneration: 8, wantRevisions: []int64{1, 4, 5, 6},
		},
		{
			name: "rollback to 4 makes revision 7 with 4's spec",
			run: func(t *testing.T) api.Resource {
				r := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollback", `{"revision":4}`)))
				if r.Spec.Compute.Image != "busybox:1.38" {
					t.Errorf("got image %q; want revision 4's busybox:1.38", r.Spec.Compute.Image)
				}
				revs := decodeAs[rest.List[api.Revision]](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app/revisions", nil)))
				if c := revs.Items[len(revs.Items)-1].Cause; c != "rollback to 4" {
					t.Errorf("got cause %q; want %q", c, "rollback to 4")
				}
				return r
			},
			wantRevision: 7, wantGeneration: 9, wantRevisions: []int64{1, 5, 6, 7},
		},
		{
			name: "rollback to the current spec writes nothing",
			run: func(t *testing.T) api.Resource {
				return decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/rollback", `{"revision":7}`)))
			},
			wantRevision: 7, wantGeneration: 9, wantRevisions: []int64{1, 5, 6, 7},
		},
		{
			name: "scale bumps the generation only",
			run: func(t *testing.T) api.Resource {
				r := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/scale", `{"replicas":7}`)))
				if r.Replicas != 7 {
					t.Errorf("got %d replicas; want 7", r.Replicas)
				}
				return r
			},
			wantRevision: 7, wantGeneration: 10, wantRevisions: []int64{1, 5, 6, 7},
		},
		{
			name: "lowering the history prunes at once",
			run: func(t *testing.T) api.Resource {
				return decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/app",
					computeBody("app", image("busybox:1.38"), func(m map[string]any) { m["maxRevisionHistory"] = 1 }))))
			},
			wantRevision: 7, wantGeneration: 11, wantRevisions: []int64{1, 7},
		},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			r := s.run(t)
			if r.Revision != s.wantRevision || r.Generation != s.wantGeneration {
				t.Errorf("got revision %d, generation %d; want %d, %d", r.Revision, r.Generation, s.wantRevision, s.wantGeneration)
			}
			if got := revisions(t); !slices.Equal(got, s.wantRevisions) {
				t.Errorf("got revisions %v; want %v", got, s.wantRevisions)
			}
			last = r
		})
		if !ok {
			return // each step builds on the last
		}
	}

	t.Run("scale limits by kind", func(t *testing.T) {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", `{"name":"vol","kind":"Volume","spec":{"volume":{"sizeMiB":10}}}`))
		r := e.must(t, http.StatusBadRequest, e.do(t, "POST", "/v1/resources/vol/scale", `{"replicas":2}`))
		if got := decodeAs[api.ErrorBody](t, r).Error.Field; got != "replicas" {
			t.Fatalf("got field %q; want replicas", got)
		}
	})
}

func TestIdempotency(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	key := withHeader("Idempotency-Key", "3f1c9a52-create")

	first := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("once"), key)))

	tests := []struct {
		name     string
		body     any
		key      reqOption
		wantCode int
		wantMsg  string
	}{
		{"same key, same body: the first result", computeBody("once"), key, http.StatusCreated, ""},
		{"same key, same body reformatted", `{"kind":"Compute","name":"once","spec":{"compute":{"image":"docker.io/library/busybox:latest"},"flavor":"small"},"replicas":1}`, key, http.StatusCreated, ""},
		{"same key, different body", computeBody("twice"), key, http.StatusConflict, "was used for a different request"},
		{"bad key", computeBody("other"), withHeader("Idempotency-Key", "no spaces please"), http.StatusBadRequest, "idempotencyKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, "POST", "/v1/resources", tt.body, tt.key)
			if r.code != tt.wantCode {
				t.Fatalf("got %s; want %d", r, tt.wantCode)
			}
			if tt.wantMsg != "" {
				if msg := decodeAs[api.ErrorBody](t, r).Error.Message; !regexp.MustCompile(regexp.QuoteMeta(tt.wantMsg)).MatchString(msg) {
					t.Fatalf("got message %q; want it to contain %q", msg, tt.wantMsg)
				}
				return
			}
			got := decodeAs[api.Resource](t, r)
			if got.UID != first.UID || got.Generation != first.Generation {
				t.Fatalf("got uid %s generation %d; want the first result's %s, %d", got.UID, got.Generation, first.UID, first.Generation)
			}
		})
	}

	t.Run("concurrent retries create one resource", func(t *testing.T) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			uids = map[string]int{}
		)
		for range 8 {
			wg.Go(func() {
				r, err := e.send(t.Context(), "POST", "/v1/resources", computeBody("racy"), withHeader("Idempotency-Key", "race-1"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					uids[err.Error()]++
					return
				}
				if r.code != http.StatusCreated {
					uids[r.String()]++
					return
				}
				var res api.Resource
				if err := json.Unmarshal(r.body, &res); err != nil {
					uids[err.Error()]++
					return
				}
				uids[res.UID]++
			})
		}
		wg.Wait()
		if len(uids) != 1 {
			t.Fatalf("got answers %v; want one uid for all 8", uids)
		}
	})

	t.Run("update retry does not bump the generation again", func(t *testing.T) {
		ukey := withHeader("Idempotency-Key", "update-1")
		body := computeBody("once", func(m map[string]any) { m["replicas"] = 5 })
		a := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/once", body, ukey)))
		// Someone else changes it in between; the retry must not undo that.
		e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/once/scale", `{"replicas":6}`))
		b := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "PUT", "/v1/resources/once", body, ukey)))
		if a.Generation != 2 || b.Generation != 3 || b.Replicas != 6 {
			t.Fatalf("got generations %d, %d and %d replicas; want 2, then 3 (the scale's) with 6", a.Generation, b.Generation, b.Replicas)
		}
	})

	t.Run("one resource per key", func(t *testing.T) {
		page := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil)))
		var names []string
		for _, r := range page.Items {
			names = append(names, r.Name)
		}
		if !slices.Equal(names, []string{"once", "racy"}) {
			t.Fatalf("got resources %v; want [once racy]", names)
		}
	})

	t.Run("prune removes old keys only", func(t *testing.T) {
		n, err := e.svc.Resources().PruneRequests(t.Context(), time.Hour)
		if err != nil || n != 0 {
			t.Fatalf("got %d pruned, %v; want 0 (all are recent)", n, err)
		}
		n, err = e.svc.Resources().PruneRequests(t.Context(), -time.Second)
		if err != nil || n != 3 {
			t.Fatalf("got %d pruned, %v; want 3", n, err)
		}
		// The key is free again: the same key now makes a new request.
		e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources", computeBody("once"), key))
	})
}

func TestDelete(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fixtures(t, nil)
	created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("gone"))))

	first := decodeAs[api.Resource](t, e.must(t, http.StatusAccepted, e.do(t, "DELETE", "/v1/resources/gone", nil)))
	if first.DeletionRequestedAt == nil || first.Generation != created.Generation+1 {
		t.Fatalf("got deletionRequestedAt %v, generation %d; want it set and generation %d", first.DeletionRequestedAt, first.Generation, created.Generation+1)
	}
	again := decodeAs[api.Resource](t, e.must(t, http.StatusAccepted, e.do(t, "DELETE", "/v1/resources/gone", nil)))
	if !again.DeletionRequestedAt.Equal(*first.DeletionRequestedAt) || again.Generation != first.Generation || again.ResourceVersion != first.ResourceVersion {
		t.Fatalf("got %v gen %d rv %d; want the first delete's %v gen %d rv %d (idempotent)",
			again.DeletionRequestedAt, again.Generation, again.ResourceVersion, first.DeletionRequestedAt, first.Generation, first.ResourceVersion)
	}

	tests := []struct {
		name   string
		method string
		path   string
		body   any
	}{
		{"update", "PUT", "/v1/resources/gone", computeBody("gone", func(m map[string]any) { m["replicas"] = 2 })},
		{"scale", "POST", "/v1/resources/gone/scale", `{"replicas":2}`},
		{"rollback", "POST", "/v1/resources/gone/rollback", `{"revision":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" of a deleting resource is a conflict", func(t *testing.T) {
			r := e.must(t, http.StatusConflict, e.do(t, tt.method, tt.path, tt.body))
			if msg := decodeAs[api.ErrorBody](t, r).Error.Message; msg != `resource "gone" is being deleted: conflict` {
				t.Fatalf("got message %q; want it to say the resource is being deleted", msg)
			}
		})
	}
	t.Run("name stays taken until the master finalises", func(t *testing.T) {
		e.must(t, http.StatusConflict, e.do(t, "POST", "/v1/resources", computeBody("gone")))
	})
}

// waitFor is a short deadline for calls the tests make directly.
func waitFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSharedCaches runs the read-your-writes paths on caches the Service
// does not own, as global.Server wires it.
func TestSharedCaches(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, envConfig{sharedCaches: true, logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	eu := newFakeRegion("eu", "n1")
	e.fixtures(t, map[string]string{"eu": eu.serve(t, e.pki)})

	member := e.token(t, "acme", api.RoleMember) // usable at once
	for i := range 5 {
		e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody(fmt.Sprintf("app-%d", i)), withToken(member)))
		page := decodeAs[ResourceList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources", nil, withToken(member))))
		if len(page.Items) != i+1 {
			t.Fatalf("got %d resources right after creating %d; want %d (read your writes)", len(page.Items), i+1, i+1)
		}
	}
	nodes := decodeAs[NodeList](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/nodes", nil)))
	if len(nodes.Items) != 1 || len(nodes.Unreachable) != 0 {
		t.Fatalf("got %+v; want eu's node (the pool shares the region cache)", nodes)
	}
	if got := logs.String(); got != "" {
		t.Fatalf("got error logs %q; want none (shared caches are not run twice)", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger used by many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGetReadsYourWrites checks that a GET of one resource sees this
// replica's writes at once and another writer's (the master's status)
// once they commit, on caches run as global.Server runs them.
func TestGetReadsYourWrites(t *testing.T) {
	e := newEnv(t, envConfig{sharedCaches: true})
	e.fixtures(t, nil)
	get := func() api.Resource {
		return decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app", nil)))
	}
	e.must(t, http.StatusNotFound, e.do(t, "GET", "/v1/resources/app", nil))
	for i := range 5 {
		created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody(fmt.Sprintf("app-%d", i)))))
		got := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "GET", "/v1/resources/app-"+fmt.Sprint(i), nil)))
		if got.UID != created.UID || got.Status == nil || got.Status.UID != created.UID {
			t.Fatalf("GET right after create: got %+v; want the created resource with its status", got)
		}
	}
	created := decodeAs[api.Resource](t, e.must(t, http.StatusCreated, e.do(t, "POST", "/v1/resources", computeBody("app"))))
	scaled := decodeAs[api.Resource](t, e.must(t, http.StatusOK, e.do(t, "POST", "/v1/resources/app/scale", `{"replicas":3}`)))
	if got := get(); got.Replicas != 3 || got.ResourceVersion != scaled.ResourceVersion {
		t.Fatalf("GET right after scale: got replicas %d rv %d; want 3 at rv %d", got.Replicas, got.ResourceVersion, scaled.ResourceVersion)
	}

	// The master (here: a direct write) reports the resource ready.
	st := *created.Status
	st.Phase, st.Ready = api.PhaseReady, 3
	if _, err := e.st.Statuses.Put(waitFor(t), state.ResourceName(DefaultTenant, "app"), &st); err != nil {
		t.Fatal(err)
	}
	poll(t, "the master's status in GET", func() error {
		if got := get(); got.Status == nil || got.Status.Phase != api.PhaseReady || got.Status.Ready != 3 {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})

	deleting := decodeAs[api.Resource](t, e.must(t, http.StatusAccepted, e.do(t, "DELETE", "/v1/resources/app", nil)))
	if got := get(); got.DeletionRequestedAt == nil || got.ResourceVersion != deleting.ResourceVersion {
		t.Fatalf("GET right after delete: got deletionRequestedAt %v rv %d; want it set at rv %d", got.DeletionRequestedAt, got.ResourceVersion, deleting.ResourceVersion)
	}
}

// TestEmptySelectorTerm: a list's selector with an empty term is a 400
// naming the parameter, not a selector of fewer terms.
func TestEmptySelectorTerm(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, tc := range []struct{ path, field string }{
		{"/v1/resources?selector=app%3Dweb,", "selector"},
		{"/v1/resources?labelSelector=app%3Dweb,,tier%3Ddb", "labelSelector"},
		{"/v1/nodes?selector=,pool%3Da", "selector"},
	} {
		r := e.must(t, http.StatusBadRequest, e.do(t, "GET", tc.path, nil))
		if got := decodeAs[api.ErrorBody](t, r).Error; got.Field != tc.field || !strings.Contains(got.Message, "is empty") {
			t.Errorf("GET %s: got %+v; want field %s saying a term is empty", tc.path, got, tc.field)
		}
	}
}
