package printers

import (
	"fmt"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// AlertRules is the table of alert rules and their delivery state.
func AlertRules(items []api.AlertRule, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "REASONS", "RECEIVER", "ACTIVE", "PENDING", "SENT", "LAST-SUCCESS", "LAST-ERROR"}}
	if wide {
		t.Header = append(t.Header, "DROPPED", "LAST-ATTEMPT", "URL")
	}
	for _, r := range items {
		d := api.AlertDelivery{}
		if r.Status != nil {
			d = *r.Status
		}
		lastErr := "-"
		if d.LastError != "" {
			lastErr = Cell(d.LastError)
		}
		row := []string{
			Cell(r.Name), Cell(strings.Join(r.Reasons, ",")), Cell(string(r.Receiver.Type)),
			fmt.Sprint(d.Active), fmt.Sprint(d.Pending), fmt.Sprint(d.Sent), ago(now, d.LastSuccess), lastErr,
		}
		if wide {
			row = append(row, fmt.Sprint(d.Dropped), ago(now, d.LastAttempt), Cell(r.Receiver.URL))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// ago is Age, or "never" for a zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return Age(now, t) + " ago"
}
