package clitest

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// resourceRoutes serves the tenants' resources: their specs, counts,
// revisions, replicas and logs.
type resourceRoutes struct{ *Server }

func (s resourceRoutes) routes() map[string]handler {
	return map[string]handler{
		"GET /v1/resources":                  s.listResources,
		"POST /v1/resources":                 s.createResource,
		"GET /v1/resources/{name}":           s.getResource,
		"PUT /v1/resources/{name}":           s.updateResource,
		"DELETE /v1/resources/{name}":        s.deleteResource,
		"POST /v1/resources/{name}/scale":    s.scale,
		"POST /v1/resources/{name}/rollback": s.rollback,
		"GET /v1/resources/{name}/revisions": s.listRevisions,
		"GET /v1/resources/{name}/replicas":  s.listReplicas,
	}
}

func tenantOf(r *http.Request, body string) string {
	return cmp.Or(r.URL.Query().Get("tenant"), body, "default")
}

type resourceBody struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func (s resourceRoutes) listResources(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	sel, err := api.ParseSelector(q.Get("selector"))
	if err != nil {
		return 0, nil, err
	}
	tenant := tenantOf(r, "")
	var all []api.Resource
	for _, res := range s.Resources {
		if res.Tenant == tenant && (q.Get("kind") == "" || string(res.Kind) == q.Get("kind")) && sel.Matches(res.Labels) {
			all = append(all, res)
		}
	}
	slices.SortFunc(all, func(a, b api.Resource) int { return cmp.Compare(a.Name, b.Name) })
	limit, _ := strconv.Atoi(q.Get("limit"))
	if s.PageSize > 0 {
		limit = s.PageSize
	}
	if limit <= 0 {
		limit = 100
	}
	out := list[api.Resource]{Items: []api.Resource{}}
	for _, res := range all {
		if res.Name <= q.Get("continue") {
			continue
		}
		if len(out.Items) == limit {
			out.Continue = out.Items[limit-1].Name
			break
		}
		out.Items = append(out.Items, res)
	}
	return http.StatusOK, out, nil
}

func (s resourceRoutes) lookup(r *http.Request) (api.Resource, string, error) {
	name := r.PathValue("name")
	key := tenantOf(r, "") + "/" + name
	res, ok := s.Resources[key]
	if !ok {
		return api.Resource{}, key, api.NotFound("resource", name)
	}
	return res, key, nil
}

func (s resourceRoutes) getResource(r *http.Request) (int, any, error) {
	res, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	if res.Deleting() {
		// The master finishes a deletion by the next look.
		delete(s.Resources, key)
		return 0, nil, api.NotFound("resource", res.Name)
	}
	return http.StatusOK, res, nil
}

func (s resourceRoutes) checkRefs(res api.Resource) error {
	if f := res.Spec.Flavor; f != "" {
		if _, ok := s.Flavors[f]; !ok {
			return api.Invalid("spec.flavor", "flavor %q does not exist", f)
		}
	}
	for i, t := range res.Schedule.Regions {
		if _, ok := s.Regions[t.Name]; !ok {
			return api.Invalid(fmt.Sprintf("schedule.regions[%d].name", i), "region %q is not registered", t.Name)
		}
	}
	return nil
}

func (s resourceRoutes) createResource(r *http.Request) (int, any, error) {
	var b resourceBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	res := b.Resource.Settable()
	if q := r.URL.Query().Get("tenant"); q != "" && res.Tenant != "" && res.Tenant != q {
		return 0, nil, api.Invalid("tenant", "%q does not match the tenant of the request, %q", res.Tenant, q)
	}
	res.Tenant = tenantOf(r, res.Tenant)
	res.Default()
	if b.Replicas != nil {
		res.Replicas = *b.Replicas
	} else {
		res.Replicas = api.DefaultReplicas(res.Kind)
	}
	if err := api.ValidateReplicas(res.Kind, res.Replicas); err != nil {
		return 0, nil, err
	}
	if err := res.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkRefs(res); err != nil {
		return 0, nil, err
	}
	key := res.Tenant + "/" + res.Name
	if _, ok := s.Resources[key]; ok {
		return 0, nil, api.AlreadyExists("resource", res.Name)
	}
	now := s.now()
	res.UID = fmt.Sprintf("uid-%s", res.Name)
	res.Revision, res.Generation, res.CreatedAt, res.UpdatedAt = 1, 1, now, now
	res.ResourceVersion = s.version()
	res.Status = &api.ResourceStatus{UID: res.UID, Phase: api.PhaseCreated, Since: now, Replicas: res.Replicas}
	s.Resources[key] = res
	s.Revisions[key] = []api.Revision{{Resource: res.Name, Tenant: res.Tenant, UID: res.UID, Number: 1, Spec: res.Spec, Cause: "create", CreatedAt: now}}
	return http.StatusCreated, res, nil
}

func (s resourceRoutes) updateResource(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b resourceBody
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	next := b.Resource.Settable()
	next.Name, next.Tenant = cur.Name, cur.Tenant
	next.Default()
	if b.Replicas != nil {
		next.Replicas = *b.Replicas
	} else {
		next.Replicas = cur.Replicas
	}
	switch {
	case cur.Deleting():
		return 0, nil, fmt.Errorf("resource %q is being deleted: %w", cur.Name, api.ErrConflict)
	case next.Kind != cur.Kind:
		return 0, nil, api.Invalid("kind", "is immutable: %q is a %s, not a %s", cur.Name, cur.Kind, next.Kind)
	case api.SameJSON(cur.Settable(), next):
		return http.StatusOK, cur, nil
	}
	if err := api.ValidateReplicas(next.Kind, next.Replicas); err != nil {
		return 0, nil, err
	}
	if err := next.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkRefs(next); err != nil {
		return 0, nil, err
	}
	newSpec := !api.SameJSON(cur.Spec, next.Spec)
	cur.Labels, cur.Spec, cur.Replicas, cur.Schedule = next.Labels, next.Spec, next.Replicas, next.Schedule
	cur.Overrides, cur.Failover, cur.Rollout, cur.MaxRevisionHistory = next.Overrides, next.Failover, next.Rollout, next.MaxRevisionHistory
	cur.Generation++
	cur.UpdatedAt, cur.ResourceVersion = s.now(), s.version()
	if newSpec {
		cur.Revision++
		s.Revisions[key] = append(s.Revisions[key], api.Revision{Resource: cur.Name, Tenant: cur.Tenant, UID: cur.UID, Number: cur.Revision, Spec: cur.Spec, Cause: "update", CreatedAt: s.now()})
	}
	s.Resources[key] = cur
	return http.StatusOK, cur, nil
}

func (s resourceRoutes) deleteResource(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	if !cur.Deleting() {
		t := s.now()
		cur.DeletionRequestedAt = &t
		s.Resources[key] = cur
	}
	return http.StatusAccepted, cur, nil
}

func (s resourceRoutes) scale(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		Replicas *int `json:"replicas"`
	}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Replicas == nil {
		return 0, nil, api.Invalid("replicas", "is required")
	}
	if err := api.ValidateReplicas(cur.Kind, *b.Replicas); err != nil {
		return 0, nil, err
	}
	if cur.Replicas != *b.Replicas {
		cur.Replicas = *b.Replicas
		cur.Generation++
		s.Resources[key] = cur
	}
	return http.StatusOK, cur, nil
}

func (s resourceRoutes) rollback(r *http.Request) (int, any, error) {
	cur, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	var b struct {
		Revision *int64 `json:"revision"`
	}
	if err := decode(r, &b); err != nil {
		return 0, nil, err
	}
	if b.Revision == nil {
		return 0, nil, api.Invalid("revision", "is required")
	}
	i := slices.IndexFunc(s.Revisions[key], func(rv api.Revision) bool { return rv.Number == *b.Revision })
	if i < 0 {
		return 0, nil, fmt.Errorf("resource %q has no revision %d: %w", cur.Name, *b.Revision, api.ErrNotFound)
	}
	target := s.Revisions[key][i]
	if api.SameJSON(cur.Spec, target.Spec) {
		return http.StatusOK, cur, nil
	}
	cur.Spec = target.Spec
	cur.Revision++
	cur.Generation++
	s.Revisions[key] = append(s.Revisions[key], api.Revision{Resource: cur.Name, Tenant: cur.Tenant, UID: cur.UID, Number: cur.Revision, Spec: cur.Spec, Cause: fmt.Sprintf("rollback to %d", *b.Revision), CreatedAt: s.now()})
	s.Resources[key] = cur
	return http.StatusOK, cur, nil
}

func (s resourceRoutes) listRevisions(r *http.Request) (int, any, error) {
	_, key, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list[api.Revision]{Items: append([]api.Revision{}, s.Revisions[key]...)}, nil
}

func (s resourceRoutes) listReplicas(r *http.Request) (int, any, error) {
	res, _, err := s.lookup(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, list[api.Replica]{Items: append([]api.Replica{}, s.Replicas[res.Name]...)}, nil
}

func (s resourceRoutes) logs(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	_, _, err := s.lookup(r)
	key := r.PathValue("name")
	if c := r.URL.Query().Get("container"); c != "" {
		key += "." + c
		if _, ok := s.Logs[key]; !ok && err == nil {
			err = fmt.Errorf("replica of %q has no container %q: %w", r.PathValue("name"), c, api.ErrNotFound)
		}
	}
	text := s.Logs[key]
	s.Mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	if n, _ := strconv.Atoi(r.URL.Query().Get("tail")); n > 0 {
		lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
		text = strings.Join(lines[max(len(lines)-n, 0):], "")
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, text)
	w.(http.Flusher).Flush()
	if r.URL.Query().Get("follow") == "true" {
		<-r.Context().Done()
	}
}
