// Package cron parses the five-field cron expressions of Job schedules
// and computes when they next fire.
//
// The grammar is Vixie cron's: minute (0-59), hour (0-23), day of month
// (1-31), month (1-12 or jan-dec), day of week (0-7 or sun-sat, 0 and 7
// both Sunday); each field is "*", a value, a range "a-b", any of these
// with a step "/n", or a comma-separated list of them. As in Vixie cron,
// when both day fields are restricted a time matches either of them.
// Times are matched in the location of the time given to Next (the
// callers pass UTC).
package cron

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed expression: one bit per allowed value of each
// field.
type Schedule struct {
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record a day field written as "*" (or "*/1"):
	// then only the other day field restricts the day.
	domStar, dowStar bool
}

type field struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var (
	fMinute = field{name: "minute", min: 0, max: 59}
	fHour   = field{name: "hour", min: 0, max: 23}
	fDom    = field{name: "day of month", min: 1, max: 31}
	fMonth  = field{name: "month", min: 1, max: 12,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	fDow = field{name: "day of week", min: 0, max: 7,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

// Parse parses a five-field expression.
func Parse(expr string) (*Schedule, error) {
	parts := strings.Fields(expr)
	if len(parts) != 5 {
		return nil, fmt.Errorf("%q has %d fields; want 5 (minute hour day-of-month month day-of-week)", expr, len(parts))
	}
	s := &Schedule{}
	var err error
	if s.minute, _, err = fMinute.parse(parts[0]); err != nil {
		return nil, err
	}
	if s.hour, _, err = fHour.parse(parts[1]); err != nil {
		return nil, err
	}
	if s.dom, s.domStar, err = fDom.parse(parts[2]); err != nil {
		return nil, err
	}
	if s.month, _, err = fMonth.parse(parts[3]); err != nil {
		return nil, err
	}
	if s.dow, s.dowStar, err = fDow.parse(parts[4]); err != nil {
		return nil, err
	}
	if s.dow&(1<<7) != 0 { // 7 is Sunday too
		s.dow |= 1
	}
	return s, nil
}

// parse returns the bits of a field and whether it was a plain "*".
func (f field) parse(text string) (uint64, bool, error) {
	var bits uint64
	star := false
	for _, item := range strings.Split(text, ",") {
		b, isStar, err := f.item(item)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", f.name, err)
		}
		bits |= b
		star = star || isStar
	}
	return bits, star, nil
}

// item parses one element of a list: "*", "v", "a-b", each with "/n".
func (f field) item(item string) (uint64, bool, error) {
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 || n > f.max {
			return 0, false, fmt.Errorf("bad step %q in %q", stepText, item)
		}
		step = n
	}
	lo, hi := f.min, f.max
	star := rng == "*"
	switch {
	case star:
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		var err error
		if lo, err = f.value(a); err != nil {
			return 0, false, err
		}
		if hi, err = f.value(b); err != nil {
			return 0, false, err
		}
		if lo > hi {
			return 0, false, fmt.Errorf("range %q goes backwards", rng)
		}
	default:
		v, err := f.value(rng)
		if err != nil {
			return 0, false, err
		}
		lo = v
		if !hasStep {
			hi = v
		}
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << uint(v)
	}
	return bits, star && step == 1, nil
}

func (f field) value(text string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(text, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < f.min || v > f.max {
		return 0, fmt.Errorf("%q is not a value between %d and %d", text, f.min, f.max)
	}
	return v, nil
}

// maxSearch bounds Next: an expression that never fires within it (such
// as "0 0 30 2 *") has no next time.
const maxSearch = 5 * 366 * 24 * time.Hour

// Next returns the first time after t (at a whole minute) that s matches,
// or the zero time when none is within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.Truncate(time.Minute).Add(time.Minute)
	end := t.Add(maxSearch)
	for t.Before(end) {
		switch {
		case s.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
		case !s.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
		case s.hour&(1<<uint(t.Hour())) == 0:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, t.Location())
		case s.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t
		}
	}
	return time.Time{}
}

func (s *Schedule) dayMatches(t time.Time) bool {
	dom := s.dom&(1<<uint(t.Day())) != 0
	dow := s.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case s.domStar && s.dowStar:
		return true
	case s.domStar:
		return dow
	case s.dowStar:
		return dom
	default:
		return dom || dow
	}
}
