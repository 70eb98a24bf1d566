package api

import "time"

// Event is something that happened that an operator may want to see: a
// scheduling decision, a state transition, a node transition, an operator
// action. Regions keep them in a capped stream; ID is the cursor within
// the region's stream.
type Event struct {
	ID      string            `json:"id"`
	Time    time.Time         `json:"time"`
	Type    string            `json:"type"`
	Reason  string            `json:"reason"`
	Object  string            `json:"object,omitempty"`
	Tenant  string            `json:"tenant,omitempty"`
	Region  string            `json:"region,omitempty"`
	Message string            `json:"message,omitempty"`
	Fields  map[string]string `json:"fields,omitempty"`
}
