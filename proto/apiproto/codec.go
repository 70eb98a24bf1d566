package apiproto

import (
	"encoding/json"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Format is how a StoreCodec writes values.
type Format int

const (
	// FormatBinary writes the protobuf encoding.
	FormatBinary Format = iota
	// FormatJSON writes JSON, as the releases before StoreCodec did, so
	// that they can still read what is written: for a rolling upgrade from
	// them (etcd.jsonValues).
	FormatJSON
)

// WriteFormat is the Format a tier's etcd.jsonValues asks for.
func WriteFormat(jsonValues bool) Format {
	if jsonValues {
		return FormatJSON
	}
	return FormatBinary
}

// StoreCodec returns the codec (a store.Codec; this package does not
// import the store, which would bring the etcd client into the agent)
// that keeps values of T in etcd as their protobuf mirror P, converted
// with to and from (the converters of this package, the same ones the
// gRPC services use). With FormatBinary it writes the binary encoding,
// which costs a fraction of the CPU and bytes of JSON; either way it
// reads both: a value that IsJSON is decoded as JSON, as the releases
// before this codec wrote it, so that a store written by them stays
// readable and is rewritten in binary object by object as it changes.
//
// Decoding goes through from, so a value read back follows the
// converters' conventions (see the package documentation): times in UTC,
// empty maps and slices nil.
func StoreCodec[T any, P proto.Message](f Format, to func(*T) P, from func(P) T) ProtoCodec[T, P] {
	var zero P
	return ProtoCodec[T, P]{to: to, from: from, msg: zero.ProtoReflect().Type(), writeJSON: f == FormatJSON}
}

// IsJSON reports whether a stored value is JSON rather than protobuf. A
// JSON object starts with '{' (encoding/json writes no leading space),
// and no protobuf message Strata stores can start with that byte: a
// message starts with a field's key, and 0x7b is the key of field 15 with
// wire type 3 (a group's start), which proto3 never writes; keys of
// fields above 15 start with a byte of 0x80 or more. The empty value (a
// message with every field at its zero) is protobuf.
func IsJSON(b []byte) bool { return len(b) > 0 && b[0] == '{' }

// ProtoCodec is the codec StoreCodec returns.
type ProtoCodec[T any, P proto.Message] struct {
	to   func(*T) P
	from func(P) T
	msg  protoreflect.MessageType
	// writeJSON: FormatJSON.
	writeJSON bool
}

// deterministic orders map entries, so that equal values give equal bytes.
var deterministic = proto.MarshalOptions{Deterministic: true}

// Marshal encodes v.
func (c ProtoCodec[T, P]) Marshal(v *T) ([]byte, error) {
	if c.writeJSON {
		return json.Marshal(v)
	}
	return deterministic.Marshal(c.to(v))
}

// Unmarshal decodes b, JSON or binary, into v.
func (c ProtoCodec[T, P]) Unmarshal(b []byte, v *T) error {
	if IsJSON(b) {
		var x T
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		*v = x
		return nil
	}
	m := c.msg.New().Interface().(P)
	if err := proto.Unmarshal(b, m); err != nil {
		return err
	}
	*v = c.from(m)
	return nil
}
