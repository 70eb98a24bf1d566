package printers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// Configs is the table of configs: their keys, never their values.
func Configs(items []api.Config, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "KEYS", "AGE"}}
	if wide {
		t.Header = append(t.Header, "TENANT", "LABELS", "UPDATED")
	}
	for _, c := range items {
		keys := make([]string, 0, len(c.Data))
		for k := range c.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		row := []string{Cell(c.Name), keyList(keys), Age(now, c.CreatedAt)}
		if wide {
			row = append(row, Cell(c.Tenant), Labels(c.Labels), Age(now, c.UpdatedAt))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Secrets is the table of secrets: their type and keys, never their
// values, even when they were revealed.
func Secrets(items []api.Secret, wide bool, now time.Time) Table {
	t := Table{Header: []string{"NAME", "TYPE", "KEYS", "AGE"}}
	if wide {
		t.Header = append(t.Header, "TENANT", "LABELS", "UPDATED")
	}
	for _, s := range items {
		row := []string{Cell(s.Name), Cell(string(s.Type)), keyList(s.Keys), Age(now, s.CreatedAt)}
		if wide {
			row = append(row, Cell(s.Tenant), Labels(s.Labels), Age(now, s.UpdatedAt))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// keyList is a count and the keys: "2 (a,b)", "0".
func keyList(keys []string) string {
	if len(keys) == 0 {
		return "0"
	}
	return Cell(fmt.Sprintf("%d (%s)", len(keys), strings.Join(keys, ",")))
}
