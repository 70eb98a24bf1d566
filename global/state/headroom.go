package state

import (
	"encoding/json"

	"github.com/stratahq/strata/internal/api"
)

// HeadroomAttr is the heartbeat attribute that carries a region's
// headroom: one JSON value, replaced whole by every beat, so that a
// flavor deleted from the catalog leaves nothing behind.
const HeadroomAttr = "headroom"

// LoadAttr is the heartbeat attribute that carries what a region's
// replicas use, per resource (api.ResourceLoad), replaced whole by every
// beat like the headroom.
const LoadAttr = "load"

// EncodeHeadroom is a region's headroom as its beat carries it.
func EncodeHeadroom(h []api.FlavorHeadroom) (string, error) { return encodeAttr(h) }

// BeatHeadroom is the headroom a beat's attributes carry; nil when they
// carry none, or a value that does not decode (another writer's), which
// shows no headroom rather than a wrong one.
func BeatHeadroom(attrs map[string]string) []api.FlavorHeadroom {
	return beatAttr[api.FlavorHeadroom](attrs, HeadroomAttr)
}

// EncodeLoad is a region's load as its beat carries it.
func EncodeLoad(l []api.ResourceLoad) (string, error) { return encodeAttr(l) }

// BeatLoad is the load a beat's attributes carry; nil as BeatHeadroom.
func BeatLoad(attrs map[string]string) []api.ResourceLoad {
	return beatAttr[api.ResourceLoad](attrs, LoadAttr)
}

func encodeAttr[T any](v []T) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func beatAttr[T any](attrs map[string]string, name string) []T {
	v := attrs[name]
	if v == "" {
		return nil
	}
	var out []T
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}
