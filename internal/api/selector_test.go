package api

import (
	"errors"
	"testing"
)

// TestValidateSelector: a selector a client sends is refused, naming
// the field it came in, when a term is empty; ParseSelector, which
// reads what was stored before, still skips such terms.
func TestValidateSelector(t *testing.T) {
	for _, tt := range []struct {
		s  string
		ok bool
	}{
		{"", true},
		{"  ", true},
		{"app=web", true},
		{"app=web,tier in (a,b)", true},
		{"app=web,", false},
		{",app=web", false},
		{"app=web,,tier=db", false},
		{"app=web, ,tier=db", false},
		{",", false},
		{"app=(", false},
	} {
		err := ValidateSelector("labelSelector", tt.s)
		if tt.ok {
			if err != nil {
				t.Errorf("ValidateSelector(%q): got %v; want nil", tt.s, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "labelSelector" {
			t.Errorf("ValidateSelector(%q): got %v; want a field error of labelSelector", tt.s, err)
		}
	}
	if sel, err := ParseSelector("app=web,"); err != nil || sel.String() != "app=web" {
		t.Errorf(`ParseSelector("app=web,"): got %q, %v; want app=web (stored selectors read as before)`, sel, err)
	}
}
