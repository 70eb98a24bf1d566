package store_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stratahq/strata/internal/store"
)

// TestIntern checks that equal strings come out as one copy, unchanged,
// and that the empty string stays empty.
func TestIntern(t *testing.T) {
	type kind string
	a, b := strings.Repeat("node-", 3), strings.Repeat("node-", 3)
	if unsafe.StringData(a) == unsafe.StringData(b) {
		t.Fatal("test strings share memory before Intern")
	}
	store.Intern(&a)
	store.Intern(&b)
	if a != "node-node-node-" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("got %q and %q at %p and %p; want equal contents at one address", a, b, unsafe.StringData(a), unsafe.StringData(b))
	}
	k := kind(strings.Repeat("node-", 3))
	store.Intern(&k)
	if string(k) != a || unsafe.StringData(string(k)) != unsafe.StringData(a) {
		t.Errorf("got kind %q; want the shared copy of %q", k, a)
	}
	var empty string
	store.Intern(&empty)
	if empty != "" {
		t.Errorf("got %q; want the empty string", empty)
	}
}
