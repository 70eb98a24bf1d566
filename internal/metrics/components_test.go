package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLapRecordsEachPhase checks that a pass's laps land in the phase
// histogram, one observation per call, under each phase's label, and
// that a nil Controller's Lap records nothing and does not panic.
func TestLapRecordsEachPhase(t *testing.T) {
	r := New("region")
	c := r.Controller()
	lap := c.Lap()
	lap("catchup")
	lap("plan")
	lap("plan")

	var none *Controller
	none.Lap()("commit")

	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`strata_controller_pass_phase_seconds_count{phase="catchup",tier="region"} 1`,
		`strata_controller_pass_phase_seconds_count{phase="plan",tier="region"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(body), `phase="commit"`) {
		t.Error("a nil Controller's lap was recorded")
	}
}

// TestMonitorBlind checks that a late look counts once with its lateness
// in seconds, that a look on time counts nothing, and that a nil Monitor
// records nothing and does not panic.
func TestMonitorBlind(t *testing.T) {
	r := New("global")
	m := r.Monitor()
	m.Blind(0)
	m.Blind(1500 * time.Millisecond)
	var none *Monitor
	none.Blind(time.Second)

	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`strata_monitor_late_looks_total{tier="global"} 1`,
		`strata_monitor_blind_seconds_total{tier="global"} 1.5`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
