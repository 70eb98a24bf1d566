// Package strictjson decodes the JSON a client wrote (a REST body, a
// manifest) strictly, and says what is wrong with it in the client's
// terms: every error is an api.FieldError whose field is the JSON path of
// the value at fault ("schedule.regions[0].weight").
//
// Refused: malformed JSON, data after the value, duplicate keys (a
// parser that keeps the last and one that keeps the first would read two
// different objects), fields the Go type does not have, and values of the
// wrong type. encoding/json alone names fields without their array
// indices (and with the Go names of embedded structs), and not at all for
// errors of a type's own UnmarshalJSON; Decode finds the exact path by
// scanning the document first.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/stratahq/strata/internal/api"
)

// MaxDepth bounds how deeply objects and arrays nest: no Strata type
// nests half as deep, and a deep document only costs.
const MaxDepth = 64

// Decode decodes data, which must hold exactly one JSON value, into v (a
// pointer).
func Decode(data []byte, v any) error {
	nodes, err := scan(data, reflect.TypeOf(v))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // scan refuses them first; kept as a backstop
	if err := dec.Decode(v); err != nil {
		return decodeError(err, data, nodes)
	}
	return nil
}

// node is one value of the document: its path and where it is.
type node struct {
	path string
	// start is the offset of its first byte, first the offset just
	// after its first token (a scalar's end, an object's '{'), end the
	// offset after its last byte.
	start, first, end int64
}

// frame is an object or array being scanned.
type frame struct {
	object  bool
	node    int // index of its node
	typ     reflect.Type
	fields  map[string]field // the struct's fields, if typ is a struct (shared: read only)
	seen    map[string]bool  // keys so far (struct fields: by field)
	key     string           // the key whose value comes next
	cur     field            // its field, if typ is a struct
	wantKey bool
	index   int
}

type field struct {
	name string
	typ  reflect.Type
}

// scan walks data's tokens, checking keys against t (nil: anything), and
// returns every value's node.
func scan(data []byte, t reflect.Type) ([]node, error) {
	sc := &scanner{dec: json.NewDecoder(bytes.NewReader(data)), data: data, t: t}
	sc.dec.UseNumber()
	for {
		done, err := sc.step()
		if err != nil || done {
			return sc.nodes, err
		}
	}
}

// scanner is scan's state.
type scanner struct {
	dec   *json.Decoder
	data  []byte
	t     reflect.Type
	nodes []node
	stack []*frame
}

// step takes one token; done at the end of the document.
func (sc *scanner) step() (done bool, err error) {
	pos := sc.dec.InputOffset()
	tok, err := sc.dec.Token()
	if err != nil || (len(sc.stack) == 0 && len(sc.nodes) > 0) {
		return true, sc.end(err, pos)
	}
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		f := sc.stack[len(sc.stack)-1]
		sc.nodes[f.node].end = sc.dec.InputOffset()
		sc.stack = sc.stack[:len(sc.stack)-1]
		return false, nil
	}
	var top *frame
	if len(sc.stack) > 0 {
		top = sc.stack[len(sc.stack)-1]
	}
	if top != nil && top.object && top.wantKey {
		return false, top.takeKey(tok.(string), sc.nodes[top.node].path)
	}
	path, vt := childOf(top, sc.nodes, sc.t)
	rest := sc.data[pos:]
	start := pos + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n,:")))
	end := sc.dec.InputOffset()
	sc.nodes = append(sc.nodes, node{path: path, start: start, first: end, end: end})
	if d, ok := tok.(json.Delim); ok {
		if len(sc.stack) == MaxDepth {
			return true, api.Invalid(path, "nests deeper than %d levels", MaxDepth)
		}
		sc.stack = append(sc.stack, newFrame(d == '{', len(sc.nodes)-1, vt))
	}
	return false, nil
}

// end is the verdict on a document that ends with err (io.EOF when it
// does not), or has more at pos after its value.
func (sc *scanner) end(err error, pos int64) error {
	switch {
	case err == io.EOF && len(sc.stack) > 0:
		return api.Invalid("", "malformed JSON: the body ends in the middle of a value")
	case err == io.EOF && len(sc.nodes) == 0:
		return api.Invalid("", "the body is empty; a JSON value is required")
	case err == io.EOF:
		return nil
	case err != nil:
		return syntaxError(err, sc.dec.InputOffset())
	}
	return api.Invalid("", "malformed JSON: unexpected data after the JSON value (at byte %d)", pos)
}

// childOf is the path and Go type of the next value in top (nil: the
// document itself, of type t), and moves top past it.
func childOf(top *frame, nodes []node, t reflect.Type) (string, reflect.Type) {
	if top == nil {
		return "", t
	}
	parent := nodes[top.node].path
	if top.object {
		top.wantKey = true
		if top.fields == nil {
			return join(parent, top.key), elem(top.typ)
		}
		return join(parent, top.key), top.cur.typ
	}
	path := fmt.Sprintf("%s[%d]", parent, top.index)
	top.index++
	return path, elem(top.typ)
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// takeKey checks an object's next key: known to the struct, and not seen
// before in this object.
func (f *frame) takeKey(key, path string) error {
	f.key, f.wantKey = key, false
	id := key
	if f.fields != nil {
		fl, ok := lookup(f.fields, key)
		if !ok {
			return api.Invalid(join(path, key), "unknown field")
		}
		f.cur = fl
		id = fl.name
	}
	if f.seen[id] {
		return api.Invalid(join(path, key), "is given twice")
	}
	f.seen[id] = true
	return nil
}

// lookup finds key among a struct's fields as encoding/json does: the
// exact name, else one that differs only in case.
func lookup(fields map[string]field, key string) (field, bool) {
	if f, ok := fields[key]; ok {
		return f, true
	}
	for name, f := range fields {
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return field{}, false
}

func newFrame(object bool, n int, t reflect.Type) *frame {
	t = checked(t)
	f := &frame{object: object, node: n, typ: t, wantKey: object, seen: map[string]bool{}}
	if object && t != nil && t.Kind() == reflect.Struct {
		f.fields = structFields(t)
	}
	return f
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checked is t with its pointers removed, or nil when the scan does not
// look inside its values: an interface, or a type that decodes itself.
func checked(t reflect.Type) reflect.Type {
	for t != nil {
		if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(unmarshaler) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// elem is the type of the values in a map, slice or array of type t.
func elem(t reflect.Type) reflect.Type {
	if t = checked(t); t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		return t.Elem()
	}
	return nil
}

// structFields are the JSON fields of struct t, embedded structs'
// included, by JSON name. They are worked out once per type (a request
// body of a few objects would otherwise reflect over every struct it
// touches) and shared: callers only read them.
func structFields(t reflect.Type) map[string]field {
	if f, ok := fieldsByType.Load(t); ok {
		return f.(map[string]field)
	}
	out := map[string]field{}
	addFields(t, out, 0)
	f, _ := fieldsByType.LoadOrStore(t, out)
	return f.(map[string]field)
}

// fieldsByType caches structFields: reflect.Type → map[string]field.
var fieldsByType sync.Map

func addFields(t reflect.Type, out map[string]field, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				// Fields of an embedded struct come after (lose to) the
				// outer struct's own.
				inner := map[string]field{}
				addFields(ft, inner, depth+1)
				for k, f := range inner {
					if _, ok := out[k]; !ok {
						out[k] = f
					}
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = field{name: name, typ: checked(ft)}
	}
}

// syntaxError describes malformed JSON.
func syntaxError(err error, offset int64) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return api.Invalid("", "malformed JSON: %s (at byte %d)", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return api.Invalid("", "malformed JSON: the body ends in the middle of a value")
	}
	return api.Invalid("", "malformed JSON: %s (at byte %d)", strings.TrimPrefix(err.Error(), "json: "), offset)
}

// decodeError restates encoding/json's error with the exact field path.
func decodeError(err error, data []byte, nodes []node) error {
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return api.Invalid(strings.Trim(name, `"`), "unknown field")
		}
		return api.Invalid("", "invalid value: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	path := typeErrorPath(typ, data, nodes)
	if path == "" && typ.Field == "" {
		return api.Invalid("", "the body must be %s, not %s", expected(typ.Type), typ.Value)
	}
	return api.Invalid(path, "must be %s, not %s", expected(typ.Type), typ.Value)
}

// typeErrorPath finds the value a type error is about: the one that ends
// where encoding/json stopped, or (for a type's own UnmarshalJSON, which
// has no offset) the first value at the field's path that does not
// decode into the type.
func typeErrorPath(typ *json.UnmarshalTypeError, data []byte, nodes []node) string {
	if typ.Offset > 0 {
		for _, n := range nodes {
			if n.first == typ.Offset {
				return n.path
			}
		}
	}
	goPath := "." + typ.Field
	for _, n := range nodes {
		if n.path == "" || typ.Type == nil {
			continue
		}
		if !strings.HasSuffix(goPath, "."+stripIndices(n.path)) {
			continue
		}
		if json.Unmarshal(data[n.start:n.end], reflect.New(typ.Type).Interface()) != nil {
			return n.path
		}
	}
	return typ.Field
}

// stripIndices drops the array indices of a path: how encoding/json
// names a field.
func stripIndices(path string) string {
	var b strings.Builder
	depth := 0
	for _, c := range path {
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// expected says what a value of type t looks like in JSON.
func expected(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	if d, ok := reflect.New(t).Elem().Interface().(interface{ Expected() string }); ok {
		return d.Expected()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
