package api

import (
	"fmt"
	"slices"
	"strings"
)

// Selector matches label sets. The text form is a comma-separated list of
// requirements: "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a,b)", "k"
// (exists) and "!k" (does not exist).
type Selector []Requirement

// Requirement is one term of a selector.
type Requirement struct {
	Key    string
	Op     string // "=", "!=", "in", "notin", "exists", "!exists"
	Values []string
}

// ParseSelector parses the text form; "" matches everything.
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	for _, term := range splitTerms(s) {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		r, err := parseRequirement(term)
		if err != nil {
			return nil, Invalid("selector", "%v", err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// SelectorFromMap makes an equality selector.
func SelectorFromMap(m map[string]string) Selector {
	sel := make(Selector, 0, len(m))
	for _, k := range sortedKeys(m) {
		sel = append(sel, Requirement{Key: k, Op: "=", Values: []string{m[k]}})
	}
	return sel
}

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		switch r.Op {
		case "=":
			if !ok || v != r.Values[0] {
				return false
			}
		case "!=":
			if ok && v == r.Values[0] {
				return false
			}
		case "in":
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case "notin":
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!exists":
			if ok {
				return false
			}
		}
	}
	return true
}

// Empty reports whether the selector matches everything.
func (s Selector) Empty() bool { return len(s) == 0 }

// splitTerms splits on commas outside parentheses.
func splitTerms(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseRequirement(t string) (Requirement, error) {
	checkKey := func(k string) error {
		if !labelKeyRE.MatchString(k) {
			return fmt.Errorf("bad label key %q in %q", k, t)
		}
		return nil
	}
	checkVal := func(v string) error {
		if !labelValRE.MatchString(v) {
			return fmt.Errorf("bad label value %q in %q", v, t)
		}
		return nil
	}
	if strings.HasPrefix(t, "!") {
		k := strings.TrimSpace(t[1:])
		return Requirement{Key: k, Op: "!exists"}, checkKey(k)
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(t, op); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if err := checkKey(k); err != nil {
				return Requirement{}, err
			}
			if err := checkVal(v); err != nil {
				return Requirement{}, err
			}
			if op == "==" {
				op = "="
			}
			return Requirement{Key: k, Op: op, Values: []string{v}}, nil
		}
	}
	fields := strings.Fields(t)
	if len(fields) >= 2 && (fields[1] == "in" || fields[1] == "notin") {
		k := fields[0]
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t[len(k):]), fields[1]))
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return Requirement{}, fmt.Errorf("%q: want %s %s (a,b)", t, k, fields[1])
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			v = strings.TrimSpace(v)
			if err := checkVal(v); err != nil {
				return Requirement{}, err
			}
			vals = append(vals, v)
		}
		return Requirement{Key: k, Op: fields[1], Values: vals}, checkKey(k)
	}
	if len(fields) == 1 {
		return Requirement{Key: t, Op: "exists"}, checkKey(t)
	}
	return Requirement{}, fmt.Errorf("cannot parse %q", t)
}

// String renders the selector in its text form.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		switch r.Op {
		case "=", "!=":
			parts[i] = r.Key + r.Op + r.Values[0]
		case "in", "notin":
			parts[i] = r.Key + " " + r.Op + " (" + strings.Join(r.Values, ",") + ")"
		case "exists":
			parts[i] = r.Key
		case "!exists":
			parts[i] = "!" + r.Key
		}
	}
	return strings.Join(parts, ",")
}
