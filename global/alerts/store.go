package alerts

import (
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/store"
)

// Keys under the global store prefix:
//
//	alertrules/<name>    api.AlertRule (written by the API; holds the receiver's secret)
//	alertstate/<name>    RuleState (written by the master, fenced)
//	alertcursor/events   Cursor (written by the master, fenced)
const (
	rulesPrefix  = "alertrules/"
	statePrefix  = "alertstate/"
	cursorPrefix = "alertcursor/"
	cursorName   = "events"
)

// Cursor is how far the master has read each region's event stream.
type Cursor struct {
	Regions map[string]string `json:"regions"`
}

// Collections are the alerts' etcd collections.
type Collections struct {
	Rules  *store.Collection[api.AlertRule]
	States *store.Collection[RuleState]
	Cursor *store.Collection[Cursor]
}

// NewCollections returns the collections over s (the global store).
func NewCollections(s *store.Store) *Collections {
	return &Collections{
		Rules:  store.NewCollection(s, rulesPrefix, store.JSON[api.AlertRule]()),
		States: store.NewCollection(s, statePrefix, store.JSON[RuleState]()),
		Cursor: store.NewCollection(s, cursorPrefix, store.JSON[Cursor]()),
	}
}
