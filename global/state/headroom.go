package state

import (
	"encoding/json"

	"github.com/stratahq/strata/internal/api"
)

// HeadroomAttr is the heartbeat attribute that carries a region's
// headroom: one JSON value, replaced whole by every beat, so that a
// flavor deleted from the catalog leaves nothing behind.
const HeadroomAttr = "headroom"

// EncodeHeadroom is a region's headroom as its beat carries it.
func EncodeHeadroom(h []api.FlavorHeadroom) (string, error) {
	b, err := json.Marshal(h)
	return string(b), err
}

// BeatHeadroom is the headroom a beat's attributes carry; nil when they
// carry none, or a value that does not decode (another writer's), which
// shows no headroom rather than a wrong one.
func BeatHeadroom(attrs map[string]string) []api.FlavorHeadroom {
	v := attrs[HeadroomAttr]
	if v == "" {
		return nil
	}
	var out []api.FlavorHeadroom
	if json.Unmarshal([]byte(v), &out) != nil {
		return nil
	}
	return out
}
