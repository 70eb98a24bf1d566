package alerts

import (
	"github.com/stratahq/strata/internal/store"
)

// Keys under the global store prefix:
//
//	alertrules/<name>    StoredRule (written by the API; the receiver's secret sealed)
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
	Rules  *store.Collection[StoredRule]
	States *store.Collection[RuleState]
	Cursor *store.Collection[Cursor]
}

// NewCollections returns the collections over s (the global store).
func NewCollections(s *store.Store) *Collections {
	return &Collections{
		Rules:  store.NewCollection(s, rulesPrefix, store.JSON[StoredRule]()),
		States: store.NewCollection(s, statePrefix, store.JSON[RuleState]()),
		Cursor: store.NewCollection(s, cursorPrefix, store.JSON[Cursor]()),
	}
}
