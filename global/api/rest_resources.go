package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/rest"
)

// resourceHandlers serve the tenants' resources (Resources), their
// revisions, rollouts, replicas and logs (Replicas) over REST.
type resourceHandlers struct {
	resources *Resources
	replicas  *Replicas
	// stream reports the error of a streaming handler (rest.API.Error).
	stream func(w http.ResponseWriter, r *http.Request, err error)
}

func (h *resourceHandlers) routes() []route {
	return []route{
		{"POST /v1/resources", h.createResource, inTenant},
		{"GET /v1/resources", h.listResources, []string{"tenant", "selector", "labelSelector", "kind", "limit", "continue"}},
		{"GET /v1/resources/{name}", h.getResource, inTenant},
		{"PUT /v1/resources/{name}", h.updateResource, inTenant},
		{"DELETE /v1/resources/{name}", h.deleteResource, inTenant},
		{"POST /v1/resources/{name}/scale", h.scaleResource, inTenant},
		{"POST /v1/resources/{name}/rollback", h.rollbackResource, inTenant},
		{"GET /v1/resources/{name}/revisions", h.listRevisions, inTenant},
		{"GET /v1/resources/{name}/replicas", h.listReplicas, inTenant},
		{"POST /v1/resources/{name}/revisions/{number}/pin", h.pinRevision(true), inTenant},
		{"POST /v1/resources/{name}/revisions/{number}/unpin", h.pinRevision(false), inTenant},
		{"POST /v1/resources/{name}/rollout/pause", h.pauseRollout(true), inTenant},
		{"POST /v1/resources/{name}/rollout/resume", h.pauseRollout(false), inTenant},
		{"POST /v1/resources/{name}/rollout/cancel", h.cancelRollout, inTenant},
	}
}

// resourceBody is a resource as a client writes it. Replicas shadows the
// embedded field so that an absent count (nil) can be told from 0.
type resourceBody struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func (b *resourceBody) resource() (api.Resource, WriteOptions) {
	r := b.Resource
	if b.Replicas != nil {
		r.Replicas = *b.Replicas
	}
	return r, WriteOptions{ReplicasUnset: b.Replicas == nil}
}

func (h *resourceHandlers) createResource(r *http.Request) (any, error) {
	var body resourceBody
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	res, o := body.resource()
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	out, err := h.resources.Create(r.Context(), tenantOf(r), res, o)
	return rest.Created(out), err
}

func (h *resourceHandlers) listResources(r *http.Request) (any, error) {
	q := r.URL.Query()
	pq, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	lq := ListQuery{Selector: q.Get("selector"), Kind: q.Get("kind"), Limit: pq.Limit, Continue: pq.Continue}
	if lq.Selector == "" {
		// Its errors name the parameter the client wrote.
		lq.Selector = q.Get("labelSelector")
		if err := api.ValidateSelector("labelSelector", lq.Selector); err != nil {
			return nil, err
		}
	}
	return h.resources.List(r.Context(), tenantOf(r), lq)
}

func (h *resourceHandlers) getResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.resources.Get(r.Context(), tenantOf(r), name)
}

func (h *resourceHandlers) updateResource(r *http.Request) (any, error) {
	var body resourceBody
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	res, o := body.resource()
	if err := putTarget(r, &res.Name, &res.ResourceVersion); err != nil {
		return nil, err
	}
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	return h.resources.Update(r.Context(), tenantOf(r), res, o)
}

func (h *resourceHandlers) deleteResource(r *http.Request) (any, error) {
	name, expect, err := deleteTarget(r)
	if err != nil {
		return nil, err
	}
	// 202: the deletion is requested; the master finishes it.
	out, err := h.resources.Delete(r.Context(), tenantOf(r), name, expect)
	return rest.Accepted(out), err
}

func (h *resourceHandlers) scaleResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var body struct {
		Replicas *int `json:"replicas"`
	}
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	if body.Replicas == nil {
		return nil, api.Invalid("replicas", "is required")
	}
	return h.resources.Scale(r.Context(), tenantOf(r), name, *body.Replicas)
}

func (h *resourceHandlers) rollbackResource(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	var body struct {
		Revision *int64 `json:"revision"`
	}
	if err := rest.Decode(r, &body); err != nil {
		return nil, err
	}
	if body.Revision == nil {
		return nil, api.Invalid("revision", "is required")
	}
	return h.resources.Rollback(r.Context(), tenantOf(r), name, *body.Revision)
}

func (h *resourceHandlers) listRevisions(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	items, err := h.resources.Revisions(r.Context(), tenantOf(r), name)
	return rest.List[api.Revision]{Items: items}, err
}

func (h *resourceHandlers) listReplicas(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.replicas.List(r.Context(), tenantOf(r), name)
}

func (h *resourceHandlers) pinRevision(pinned bool) rest.Func {
	return func(r *http.Request) (any, error) {
		name, err := rest.PathName(r, "name")
		if err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(r.PathValue("number"), 10, 64)
		if err != nil || n <= 0 {
			return nil, api.Invalid("revision", "%q is not a revision number", r.PathValue("number"))
		}
		return h.resources.PinRevision(r.Context(), tenantOf(r), name, n, pinned)
	}
}

func (h *resourceHandlers) pauseRollout(paused bool) rest.Func {
	return func(r *http.Request) (any, error) {
		name, err := rest.PathName(r, "name")
		if err != nil {
			return nil, err
		}
		return h.resources.PauseRollout(r.Context(), tenantOf(r), name, paused)
	}
}

func (h *resourceHandlers) cancelRollout(r *http.Request) (any, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return nil, err
	}
	return h.resources.CancelRollout(r.Context(), tenantOf(r), name)
}

// logs streams text/plain: GET /v1/resources/{name}/logs?replica=&follow=&tail=
func (h *resourceHandlers) logs(w http.ResponseWriter, r *http.Request) {
	name, o, err := logRequest(r)
	if err != nil {
		h.stream(w, r, err)
		return
	}
	lw := &lazyWriter{w: w}
	err = h.replicas.Logs(r.Context(), tenantOf(r), name, o, lw)
	switch {
	case err != nil && !lw.started:
		h.stream(w, r, err)
	case err != nil:
		fmt.Fprintf(w, "\n[strata: log stream ended: %v]\n", err)
	default:
		lw.Start() // an empty log is still a text/plain 200
	}
}

func logRequest(r *http.Request) (string, LogOptions, error) {
	name, err := rest.PathName(r, "name")
	if err != nil {
		return "", LogOptions{}, err
	}
	o := LogOptions{Replica: r.URL.Query().Get("replica")}
	if o.Follow, err = rest.QueryBool(r, "follow"); err != nil {
		return "", LogOptions{}, err
	}
	if o.TailLines, err = rest.QueryInt(r, "tail"); err != nil || o.TailLines < 0 {
		return "", LogOptions{}, api.Invalid("tail", "%q is not a number of lines", r.URL.Query().Get("tail"))
	}
	if o.Container = r.URL.Query().Get("container"); o.Container != "" {
		if err := api.ValidateName("container", o.Container); err != nil {
			return "", LogOptions{}, err
		}
	}
	return name, o, nil
}

// lazyWriter sends the streaming headers only with the first byte, so
// that an error before any output still becomes a JSON error.
type lazyWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.Start()
	return l.w.Write(p)
}

// Start sends the headers of the stream, once, and flushes them: from
// then on an error can only end the stream.
func (l *lazyWriter) Start() {
	if l.started {
		return
	}
	l.started = true
	l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	l.w.Header().Set("X-Content-Type-Options", "nosniff")
	l.w.WriteHeader(http.StatusOK)
	l.Flush()
}

func (l *lazyWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}
