// Package logcheck finds log records that carry a key twice: a logger
// that got .With("tier", …) from its caller and again from its own
// component, or a log call repeating an attribute its logger already has
// (`region=r1 … region=r1`). Such records are ambiguous in a JSON log
// (most parsers keep one of the two) and noisy in text.
//
// Handler checks the records of a logger a test builds; Line checks a
// JSON line a process wrote, for tests that run the real binaries.
package logcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Handler passes records on to its inner handler and remembers every
// record with a repeated key (group-qualified, as a JSON handler nests
// them).
type Handler struct {
	inner  slog.Handler
	prefix string   // open groups, "a.b."
	keys   []string // keys added by WithAttrs, qualified
	found  *found
}

type found struct {
	mu    sync.Mutex
	dups  []string
	limit int
}

// NewHandler wraps inner (nil discards).
func NewHandler(inner slog.Handler) *Handler {
	if inner == nil {
		inner = slog.DiscardHandler
	}
	return &Handler{inner: inner, found: &found{limit: 20}}
}

// New returns a logger whose records are checked for the rest of the
// test: the test fails at its end if any record repeated a key. Records
// go to inner (nil discards).
func New(t testing.TB, inner slog.Handler) *slog.Logger {
	t.Helper()
	h := NewHandler(inner)
	// Registered first, so it runs after the cleanups that stop what
	// logs (those are registered later and run earlier).
	t.Cleanup(func() {
		if d := h.Duplicates(); len(d) > 0 {
			t.Errorf("log records with a repeated key (set each attribute once per logger chain):\n  %s", strings.Join(d, "\n  "))
		}
	})
	return slog.New(h)
}

// Duplicates describes the records that repeated a key, at most 20.
func (h *Handler) Duplicates() []string {
	h.found.mu.Lock()
	defer h.found.mu.Unlock()
	return slices.Clone(h.found.dups)
}

// Enabled implements slog.Handler: every level is checked, whatever the
// inner handler shows.
func (h *Handler) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	// The built-in keys count: an attribute named "msg" collides with the
	// message in every handler's output.
	keys := append([]string{slog.TimeKey, slog.LevelKey, slog.MessageKey}, h.keys...)
	r.Attrs(func(a slog.Attr) bool {
		keys = appendKeys(keys, h.prefix, a)
		return true
	})
	if d := repeated(keys); len(d) > 0 {
		h.found.add(fmt.Sprintf("%q repeats %s", r.Message, strings.Join(d, ", ")))
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.keys = slices.Clone(h.keys)
	for _, a := range attrs {
		c.keys = appendKeys(c.keys, h.prefix, a)
	}
	c.inner = h.inner.WithAttrs(attrs)
	return &c
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	c.inner = h.inner.WithGroup(name)
	return &c
}

func (f *found) add(d string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dups) < f.limit {
		f.dups = append(f.dups, d)
	}
}

// appendKeys adds a's key (or, for a group, its members' keys) under
// prefix, as slog's built-in handlers would write them.
func appendKeys(keys []string, prefix string, a slog.Attr) []string {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" { // an inline group's members belong to the parent
			p = prefix + a.Key + "."
		}
		for _, m := range v.Group() {
			keys = appendKeys(keys, p, m)
		}
		return keys
	}
	if a.Key == "" {
		return keys // slog drops empty attributes
	}
	return append(keys, prefix+a.Key)
}

func repeated(keys []string) []string {
	seen := make(map[string]int, len(keys))
	var out []string
	for _, k := range keys {
		seen[k]++
		if seen[k] == 2 {
			out = append(out, k)
		}
	}
	return out
}

// Line returns the keys that one JSON log line repeats within an object,
// dotted by nesting (e.g. "tier", "req.id"). A line that is not one JSON
// object is an error: a process that writes JSON logs writes nothing
// else.
func Line(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var out []string
	if err := object(dec, "", &out, true); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w: %.200s", err, line)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one JSON value: %.200s", line)
	}
	return out, nil
}

// object reads one JSON object (top: the opening brace is still to come)
// and collects repeated keys.
func object(dec *json.Decoder, prefix string, out *[]string, top bool) error {
	if top {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return fmt.Errorf("starts with %v", tok)
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("key %v", tok)
		}
		if seen[key] {
			*out = append(*out, prefix+key)
		}
		seen[key] = true
		if err := value(dec, prefix+key+".", out); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func value(dec *json.Decoder, prefix string, out *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	switch d {
	case '{':
		return object(dec, prefix, out, false)
	case '[':
		for dec.More() {
			if err := value(dec, prefix, out); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return fmt.Errorf("unexpected %v", d)
}
