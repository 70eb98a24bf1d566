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

// ParseSelector parses the text form; "" matches everything. It skips
// empty terms, so that a selector stored before ValidateSelector refused
// them still selects what it did: check what a client sends with
// ValidateSelector.
func ParseSelector(s string) (Selector, error) {
	sel, err := parseSelector(s)
	if err != nil {
		return nil, Invalid("selector", "%v", err)
	}
	return sel, nil
}

// ValidateSelector checks a selector a client sent, its errors naming
// field: it parses, and no term of it is empty. "app=web,,tier=db" and
// "app=web," are a stray comma, or a term a script lost, not a selector
// of fewer terms, and skipping the empty term would select more than
// was meant. "" (or only spaces) selects everything.
func ValidateSelector(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	terms := splitTerms(s)
	for i, term := range terms {
		if strings.TrimSpace(term) == "" {
			return Invalid(field, "term %d of %d in %q is empty: remove the stray comma", i+1, len(terms), s)
		}
	}
	if _, err := parseSelector(s); err != nil {
		return Invalid(field, "%v", err)
	}
	return nil
}

func parseSelector(s string) (Selector, error) {
	var sel Selector
	for _, term := range splitTerms(s) {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		r, err := parseRequirement(term)
		if err != nil {
			return nil, err
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
		if !r.matches(labels) {
			return false
		}
	}
	return true
}

func (r Requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case "=":
		return ok && v == r.Values[0]
	case "!=":
		return !ok || v != r.Values[0]
	case "in":
		return ok && slices.Contains(r.Values, v)
	case "notin":
		return !ok || !slices.Contains(r.Values, v)
	case "exists":
		return ok
	case "!exists":
		return !ok
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
	if strings.HasPrefix(t, "!") {
		k := strings.TrimSpace(t[1:])
		return Requirement{Key: k, Op: "!exists"}, checkLabelKey(k, t)
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(t, op); ok {
			return parseEquality(t, strings.TrimSpace(k), op, strings.TrimSpace(v))
		}
	}
	fields := strings.Fields(t)
	if len(fields) >= 2 && (fields[1] == "in" || fields[1] == "notin") {
		return parseSet(t, fields[0], fields[1])
	}
	if len(fields) == 1 {
		return Requirement{Key: t, Op: "exists"}, checkLabelKey(t, t)
	}
	return Requirement{}, fmt.Errorf("cannot parse %q", t)
}

// parseEquality is the requirement "k op v" of term t.
func parseEquality(t, k, op, v string) (Requirement, error) {
	if err := checkLabelKey(k, t); err != nil {
		return Requirement{}, err
	}
	if err := checkLabelValue(v, t); err != nil {
		return Requirement{}, err
	}
	if op == "==" {
		op = "="
	}
	return Requirement{Key: k, Op: op, Values: []string{v}}, nil
}

// parseSet is the requirement "k in (a,b)" (op in or notin) of term t.
func parseSet(t, k, op string) (Requirement, error) {
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t[len(k):]), op))
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return Requirement{}, fmt.Errorf("%q: want %s %s (a,b)", t, k, op)
	}
	var vals []string
	for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
		v = strings.TrimSpace(v)
		if err := checkLabelValue(v, t); err != nil {
			return Requirement{}, err
		}
		vals = append(vals, v)
	}
	return Requirement{Key: k, Op: op, Values: vals}, checkLabelKey(k, t)
}

// checkLabelKey checks key k of term t.
func checkLabelKey(k, t string) error {
	if !labelKeyRE.MatchString(k) {
		return fmt.Errorf("bad label key %q in %q", k, t)
	}
	return nil
}

// checkLabelValue checks value v of term t.
func checkLabelValue(v, t string) error {
	if !labelValRE.MatchString(v) {
		return fmt.Errorf("bad label value %q in %q", v, t)
	}
	return nil
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
