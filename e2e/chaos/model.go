package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// opKind is what a load client asked.
type opKind string

const (
	opCreate opKind = "create"
	opPut    opKind = "put"
	opScale  opKind = "scale"
	opDelete opKind = "delete"
	opGet    opKind = "get"
)

// outcome is what became of a request.
type outcome string

const (
	// outOK: the API acknowledged it (2xx).
	outOK outcome = "ok"
	// outRefused: a definite answer that nothing was written (404, 409).
	outRefused outcome = "refused"
	// outUnknown: no answer, or one that does not say whether the write
	// happened (a timeout, a broken connection, a 5xx): the write may or
	// may not have taken effect, at any time from its start on.
	outUnknown outcome = "unknown"
)

// Op is one request of the history, with what the client sent and what
// it got back.
type Op struct {
	Client int       `json:"client"`
	Key    string    `json:"key"`
	Kind   opKind    `json:"kind"`
	Mark   string    `json:"mark,omitempty"`
	Count  int       `json:"replicas,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`

	Status  int     `json:"status"`
	Err     string  `json:"err,omitempty"`
	Outcome outcome `json:"outcome"`
	// What the answer said of the resource (2xx): its mark (spec env and
	// label), replicas, resourceVersion, and whether it is being deleted.
	// A 404 says it is absent; a 409 that it exists (create) or is being
	// deleted (put, scale).
	OutMark     string `json:"outMark,omitempty"`
	OutCount    int    `json:"outReplicas,omitempty"`
	OutRV       int64  `json:"outRV,omitempty"`
	OutDeleting bool   `json:"outDeleting,omitempty"`
}

func (o Op) write() bool { return o.Kind != opGet }

// phase of a resource in the model.
type phase int

const (
	absent phase = iota
	present
	deleting
)

// regState is the model of one resource: a register holding a mark and
// a replica count, with the resourceVersion as its version (a lower
// bound: server-side writes to the resource may raise it).
type regState struct {
	Phase    phase
	Mark     string
	Replicas int
	RV       int64
}

// expand: a resource being deleted may be gone at any moment, when the
// regions have destroyed its replicas.
func expand(s regState) []regState {
	if s.Phase == deleting {
		return []regState{s, {Phase: absent, RV: s.RV}}
	}
	return []regState{s}
}

// apply is the effect of a write that took effect, its answer unknown.
func apply(s regState, in Op) regState {
	switch {
	case in.Kind == opCreate && s.Phase == absent:
		return regState{Phase: present, Mark: in.Mark, Replicas: in.Count, RV: s.RV}
	case in.Kind == opPut && s.Phase == present:
		s.Mark = in.Mark
	case in.Kind == opScale && s.Phase == present:
		s.Replicas = in.Count
	case in.Kind == opDelete && s.Phase == present:
		s.Phase = deleting
	}
	return s
}

// step is the model's transition: every state the resource may be in
// after op, given that it answered as recorded; none if the answer is
// impossible from s.
func step(s0 regState, op Op) []regState {
	var out []regState
	for _, s := range expand(s0) {
		if op.Outcome == outUnknown {
			out = append(out, s, apply(s, op))
			continue
		}
		if n, ok := observe(s, op); ok {
			out = append(out, n)
		}
	}
	return out
}

// observe checks a definite answer against s.
func observe(s regState, op Op) (regState, bool) {
	if op.Outcome == outRefused {
		return s, refusalFits(s, op)
	}
	if f, ok := acknowledged[op.Kind]; ok {
		return f(s, op)
	}
	return s, false
}

// refusalFits: a 404 says the resource is absent; a 409 to a create that
// it exists, to anything else that it is being deleted.
func refusalFits(s regState, op Op) bool {
	switch {
	case op.Status == 404:
		return s.Phase == absent
	case op.Status == 409 && op.Kind == opCreate:
		return s.Phase != absent
	case op.Status == 409:
		return s.Phase == deleting
	}
	return false
}

// shows reports whether op's answer shows the mark, the count and the
// deletion given.
func shows(op Op, mark string, count int, deleting bool) bool {
	return op.OutMark == mark && op.OutCount == count && op.OutDeleting == deleting
}

// acknowledged checks a 2xx answer of each kind against s and returns
// the state after it. A write that changes the spec (create, put) gets a
// new resourceVersion; scale and delete may keep it; a read never sees
// an older one.
var acknowledged = map[opKind]func(s regState, op Op) (regState, bool){
	opCreate: func(s regState, op Op) (regState, bool) {
		ok := s.Phase == absent && shows(op, op.Mark, op.Count, false) && op.OutRV > s.RV
		return regState{Phase: present, Mark: op.Mark, Replicas: op.Count, RV: op.OutRV}, ok
	},
	opPut: func(s regState, op Op) (regState, bool) {
		ok := s.Phase == present && shows(op, op.Mark, s.Replicas, false) && op.OutRV > s.RV
		s.Mark, s.RV = op.Mark, op.OutRV
		return s, ok
	},
	opScale: func(s regState, op Op) (regState, bool) {
		ok := s.Phase == present && shows(op, s.Mark, op.Count, false) && op.OutRV >= s.RV
		s.Replicas, s.RV = op.Count, op.OutRV
		return s, ok
	},
	opDelete: func(s regState, op Op) (regState, bool) {
		ok := s.Phase != absent && op.OutMark == s.Mark && op.OutRV >= s.RV
		s.Phase, s.RV = deleting, op.OutRV
		return s, ok
	},
	opGet: func(s regState, op Op) (regState, bool) {
		want := present
		if op.OutDeleting {
			want = deleting
		}
		ok := s.Phase == want && shows(op, s.Mark, s.Replicas, op.OutDeleting) && op.OutRV >= s.RV
		s.RV = op.OutRV
		return s, ok
	},
}

// registerModel is the porcupine model: one register per resource key.
var registerModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range history {
			k := o.Input.(Op).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{regState{}} },
	Step: func(state, input, _ interface{}) []interface{} {
		var out []interface{}
		for _, s := range step(state.(regState), input.(Op)) {
			out = append(out, s)
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, _ interface{}) string {
		o := input.(Op)
		return fmt.Sprintf("%s %s mark=%s n=%d -> %s %d rv=%d mark=%s n=%d del=%v", o.Kind, o.Key, o.Mark, o.Count,
			o.Outcome, o.Status, o.OutRV, o.OutMark, o.OutCount, o.OutDeleting)
	},
	DescribeState: func(state interface{}) string {
		s := state.(regState)
		return fmt.Sprintf("%v mark=%s n=%d rv>=%d", []string{"absent", "present", "deleting"}[s.Phase], s.Mark, s.Replicas, s.RV)
	},
}

// porcupineHistory turns the recorded ops into porcupine's: an op whose
// outcome is unknown may take effect at any time after its start, so it
// ends at infinity; reads that got no answer tell nothing and are left
// out.
func porcupineHistory(ops []Op) []porcupine.Operation {
	var out []porcupine.Operation
	base := time.Time{}
	for _, o := range ops {
		if base.IsZero() || o.Start.Before(base) {
			base = o.Start
		}
	}
	for _, o := range ops {
		if o.Kind == opGet && o.Outcome == outUnknown {
			continue
		}
		end := int64(o.End.Sub(base))
		if o.Outcome == outUnknown {
			end = 1<<62 + int64(len(out))
		}
		out = append(out, porcupine.Operation{ClientId: o.Client, Input: o, Call: int64(o.Start.Sub(base)), Output: nil, Return: end})
	}
	return out
}

// checkLinearizable runs porcupine over the history, within timeout.
func checkLinearizable(ops []Op, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(registerModel.ToModel(), porcupineHistory(ops), timeout)
}
