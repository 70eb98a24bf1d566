package cron

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		expr, from, want string
	}{
		{"* * * * *", "2026-01-01 10:00", "2026-01-01 10:01"},
		{"*/15 * * * *", "2026-01-01 10:07", "2026-01-01 10:15"},
		{"*/15 * * * *", "2026-01-01 10:45", "2026-01-01 11:00"},
		{"0 3 * * *", "2026-01-01 03:00", "2026-01-02 03:00"},
		{"30 2 1 * *", "2026-01-15 00:00", "2026-02-01 02:30"},
		{"0 0 * * mon", "2026-11-27 12:00", "2026-11-30 00:00"}, // a Friday
		{"0 0 * * 7", "2026-11-27 12:00", "2026-11-29 00:00"},   // Sunday as 7
		{"0 0 13 * 5", "2026-11-01 00:00", "2026-11-06 00:00"},  // day 13 or a Friday
		{"0 12 29 feb *", "2026-03-01 00:00", "2028-02-29 12:00"},
		{"5-10/2 1,2 * jan-mar *", "2026-02-28 23:59", "2026-03-01 01:05"},
		{"0 0 30 2 *", "2026-01-01 00:00", "0001-01-01 00:00"}, // never
	}
	for _, tc := range tests {
		t.Run(tc.expr+" from "+tc.from, func(t *testing.T) {
			s, err := Parse(tc.expr)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := s.Next(at(tc.from))
			want := at(tc.want)
			if tc.want == "0001-01-01 00:00" {
				want = time.Time{}
			}
			if !got.Equal(want) {
				t.Errorf("got %s; want %s", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, expr := range []string{
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
		"* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *", "1,,2 * * * *",
		"* * * foo *",
	} {
		if _, err := Parse(expr); err == nil {
			t.Errorf("Parse(%q): got no error; want one", expr)
		}
	}
}
