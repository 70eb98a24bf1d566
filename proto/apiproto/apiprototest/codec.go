package apiprototest

import (
	"encoding/json"
	"reflect"

	"github.com/stratahq/strata/internal/store"
)

// CheckCodec checks a binary store codec (apiproto.StoreCodec) and returns
// what went wrong:
//   - a value with every field filled comes back equal after Marshal and
//     Unmarshal, and Marshal leaves its input alone;
//   - the bytes never start with '{', the mark of a JSON value;
//   - the same value written as JSON, the way the releases before the
//     codec stored it, decodes to it too;
//   - the zero value survives, and so does the JSON empty object.
func CheckCodec[T any](c store.Codec[T]) []string {
	name := reflect.TypeFor[T]().Name()
	var in, want T
	if errs := Fill(&in, name); len(errs) > 0 {
		return errs
	}
	Fill(&want, name)

	b, err := c.Marshal(&in)
	if err != nil {
		return []string{"marshal: " + err.Error()}
	}
	var probs []string
	if !reflect.DeepEqual(in, want) {
		probs = append(probs, "Marshal changed its input")
	}
	if len(b) == 0 || isJSON(b) {
		probs = append(probs, "a filled value encodes to bytes that look like JSON (or none)")
	}
	probs = append(probs, decodes(c, "binary", b, want)...)

	j, err := json.Marshal(&want)
	if err != nil {
		return append(probs, "json: "+err.Error())
	}
	probs = append(probs, decodes(c, "JSON", j, want)...)

	var zero T
	if b, err = c.Marshal(&zero); err != nil {
		return append(probs, "marshal zero: "+err.Error())
	}
	probs = append(probs, decodes(c, "zero binary", b, zero)...)
	return append(probs, decodes(c, "zero JSON", []byte("{}"), zero)...)
}

// CheckBinary checks the codec of a collection that must store binary
// values (CheckCodec), and that it does.
func CheckBinary[T any](c *store.Collection[T]) []string {
	var zero T
	b, err := c.Codec().Marshal(&zero)
	if err != nil || isJSON(b) {
		return []string{"the collection stores JSON"}
	}
	return CheckCodec(c.Codec())
}

// CheckJSONWrites checks the JSON-writing twin of a binary codec
// (apiproto.FormatJSON): a filled value is written as JSON that
// encoding/json reads back whole, and the twin still reads binary.
func CheckJSONWrites[T any](bin, js store.Codec[T]) []string {
	var in T
	Fill(&in, "in")
	b, err := js.Marshal(&in)
	if err != nil {
		return []string{"marshal: " + err.Error()}
	}
	var old T
	if err := json.Unmarshal(b, &old); err != nil || !isJSON(b) {
		return []string{"not JSON: " + string(b)}
	}
	probs := Compare("JSON", old, in)
	if b, err = bin.Marshal(&in); err != nil {
		return append(probs, "marshal binary: "+err.Error())
	}
	return append(probs, decodes(js, "binary", b, in)...)
}

// isJSON is apiproto.IsJSON, which this package cannot import (the
// package's own tests use it).
func isJSON(b []byte) bool { return len(b) > 0 && b[0] == '{' }

// decodes unmarshals b into a value that is not zero to start with (a
// decoder must not keep what was there) and compares it with want.
func decodes[T any](c store.Codec[T], what string, b []byte, want T) []string {
	var got T
	Fill(&got, "stale")
	if err := c.Unmarshal(b, &got); err != nil {
		return []string{what + ": unmarshal: " + err.Error()}
	}
	return Compare(what, got, want)
}
