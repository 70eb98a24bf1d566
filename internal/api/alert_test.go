package api

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAlertRuleValidateReportsEveryError: a rule with a mistake in each
// of its parts is refused with every one of them, in the order of the
// fields, as a Resource is.
func TestAlertRuleValidateReportsEveryError(t *testing.T) {
	long := D(2 * time.Hour)
	r := AlertRule{
		Name:      "Bad_Name",
		Reasons:   []string{"NodeDown", "node down", "NodeDown"},
		Region:    "EU",
		Tenant:    "-t",
		Object:    "node/\x00",
		Selector:  "severity=crit ical",
		Labels:    map[string]string{"": "x"},
		GroupWait: &long,
		Receiver:  AlertReceiver{Type: "slack", URL: "ftp://hooks.example.com/", Secret: "short"},
	}
	want := []string{
		"name", "reasons[1]", "reasons[2]", "region", "tenant", "object", "selector", "labels", "groupWait",
		"receiver.type", "receiver.url", "receiver.secret",
	}
	err := r.Validate()
	var got []string
	for _, fe := range Fields(err) {
		got = append(got, fe.Field)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fields at fault: got %q; want %q (%v)", got, want, err)
	}
	if !strings.Contains(err.Error(), `"node down" is not an event reason`) || !strings.Contains(err.Error(), `"NodeDown" is listed twice`) {
		t.Errorf("error %q; want both reasons' mistakes", err)
	}

	ok := AlertRule{Name: "nodes", Reasons: []string{"NodeDown"},
		Receiver: AlertReceiver{Type: ReceiverWebhook, URL: "https://hooks.example.com/strata"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid rule: %v", err)
	}
	ok.Receiver.URL = ""
	if got := Fields(ok.Validate()); len(got) != 1 || got[0].Field != "receiver.url" {
		t.Fatalf("one mistake: got %v; want receiver.url alone", got)
	}
}
