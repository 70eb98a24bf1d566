package containerd

import (
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// TestConditionMarks checks that a condition's Since is when its status
// last changed, not when it was asked.
func TestConditionMarks(t *testing.T) {
	var cm conditionMarks
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(now time.Time, cri, cni api.ConditionStatus) []api.Condition {
		cs := []api.Condition{{Type: api.ConditionCRI, Status: cri}, {Type: api.ConditionCNI, Status: cni}}
		cm.stamp(cs, now)
		return cs
	}
	at(t0, api.ConditionReady, api.ConditionReady)
	cs := at(t0.Add(time.Minute), api.ConditionReady, api.ConditionWarning)
	if !cs[0].Since.Equal(t0) {
		t.Errorf("unchanged CRI: got since %v; want %v", cs[0].Since, t0)
	}
	if want := t0.Add(time.Minute); !cs[1].Since.Equal(want) {
		t.Errorf("changed CNI: got since %v; want %v", cs[1].Since, want)
	}
	cs = at(t0.Add(2*time.Minute), api.ConditionReady, api.ConditionWarning)
	if want := t0.Add(time.Minute); !cs[1].Since.Equal(want) {
		t.Errorf("CNI still Warning: got since %v; want %v", cs[1].Since, want)
	}
}
