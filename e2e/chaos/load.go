package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/stratahq/strata/e2e/framework"
)

// flavorName is the flavor every resource of the load uses.
const flavorName = "chaos"

// load is the clients that write through the global load balancer while
// a scenario runs, recording every request and its answer.
type load struct {
	keys    []string
	clients int
	rng     *rand.Rand
	rest    func() *framework.Client

	mu  sync.Mutex
	ops []Op
	seq int
}

// resourceJSON is what the load reads back of a resource.
type resourceJSON struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels"`
	Replicas int               `json:"replicas"`
	Spec     struct {
		Compute struct {
			Env map[string]string `json:"env"`
		} `json:"compute"`
	} `json:"spec"`
	ResourceVersion     int64      `json:"resourceVersion"`
	DeletionRequestedAt *time.Time `json:"deletionRequestedAt"`
}

func newLoad(seed uint64, keys []string, clients int, rest func() *framework.Client) *load {
	return &load{keys: keys, clients: clients, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), rest: rest}
}

// body is the resource as the load writes it: the mark in an env
// variable of the spec (a spec change: a new revision and a rollout)
// and in a label.
func body(key, mark string, replicas int, withReplicas bool) map[string]any {
	b := map[string]any{
		"kind":   "Compute",
		"labels": map[string]string{"mark": mark},
		"spec": map[string]any{"flavor": flavorName, "compute": map[string]any{
			"image": "busybox", "env": map[string]string{"MARK": mark},
		}},
		// No surge: a rollout never runs more replicas than asked, so
		// the sampler may hold the count to what was asked.
		"rollout":  map[string]any{"maxSurge": 0, "maxUnavailable": 1},
		"schedule": map[string]any{"nodeSelector": map[string]string{"runtime": "fake"}},
	}
	if withReplicas {
		b["name"], b["replicas"] = key, replicas
	}
	return b
}

// run sends requests until ctx ends; each client waits 100-400 ms
// between requests (about 3.5 requests a second each).
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	for c := range l.clients {
		l.mu.Lock()
		rng := rand.New(rand.NewPCG(l.rng.Uint64(), uint64(c)))
		l.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			belief := map[string]phase{}
			for ctx.Err() == nil {
				key := l.keys[rng.IntN(len(l.keys))]
				op := l.choose(rng, c, key, belief[key])
				op = l.do(op)
				belief[key] = learn(belief[key], op)
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
}

// choose picks a request that likely succeeds given what the client
// believes of the key.
func (l *load) choose(rng *rand.Rand, client int, key string, b phase) Op {
	l.mu.Lock()
	l.seq++
	mark := fmt.Sprintf("c%d-%d", client, l.seq)
	l.mu.Unlock()
	op := Op{Client: client, Key: key, Mark: mark, Count: 1 + rng.IntN(4)}
	switch b {
	case absent:
		op.Kind = opCreate
	case deleting:
		op.Kind = opGet
	default:
		switch p := rng.IntN(100); {
		case p < 35:
			op.Kind = opPut
		case p < 60:
			op.Kind = opScale
		case p < 90:
			op.Kind = opGet
		default:
			op.Kind = opDelete
		}
	}
	if op.Kind != opCreate && op.Kind != opPut {
		op.Mark = ""
	}
	if op.Kind != opCreate && op.Kind != opScale {
		op.Count = 0
	}
	return op
}

func learn(b phase, op Op) phase {
	switch {
	case op.Status == 404:
		return absent
	case op.Status == 409 && op.Kind == opCreate:
		return present
	case op.Status == 409:
		return deleting
	case op.Outcome != outOK:
		return b
	case op.OutDeleting:
		return deleting
	}
	return present
}

// do sends op, records it and returns it with its answer.
func (l *load) do(op Op) Op {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var method, path string
	var b any
	switch op.Kind {
	case opCreate:
		method, path, b = http.MethodPost, "/v1/resources", body(op.Key, op.Mark, op.Count, true)
	case opPut:
		method, path, b = http.MethodPut, "/v1/resources/"+op.Key, body(op.Key, op.Mark, 0, false)
	case opScale:
		method, path, b = http.MethodPost, "/v1/resources/"+op.Key+"/scale", map[string]int{"replicas": op.Count}
	case opDelete:
		method, path = http.MethodDelete, "/v1/resources/"+op.Key
	case opGet:
		method, path = http.MethodGet, "/v1/resources/"+op.Key
	}
	op.Start = time.Now()
	resp, err := l.rest().Do(ctx, method, path, b)
	op.End = time.Now()
	switch {
	case err != nil:
		op.Outcome, op.Err = outUnknown, err.Error()
	case resp.Status >= 200 && resp.Status < 300:
		var r resourceJSON
		if err := json.Unmarshal(resp.Body, &r); err != nil {
			op.Outcome, op.Err = outUnknown, err.Error()
			break
		}
		op.Status, op.Outcome = resp.Status, outOK
		op.OutMark, op.OutCount, op.OutRV, op.OutDeleting = r.Labels["mark"], r.Replicas, r.ResourceVersion, r.DeletionRequestedAt != nil
		if r.Spec.Compute.Env["MARK"] != op.OutMark {
			// The label and the spec were written together: one without
			// the other is a torn write, which the model refuses.
			op.OutMark = "torn:" + r.Spec.Compute.Env["MARK"] + "/" + op.OutMark
		}
	case resp.Status == 404 || resp.Status == 409:
		op.Status, op.Outcome, op.Err = resp.Status, outRefused, string(resp.Body)
	default:
		// 5xx (etcd unavailable, the master gone mid-request) and
		// anything else: the write may have happened.
		op.Status, op.Outcome, op.Err = resp.Status, outUnknown, string(resp.Body)
	}
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
	return op
}

// history is a copy of the recorded ops.
func (l *load) history() []Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Op(nil), l.ops...)
}
