// Package api holds Strata's domain types: what is stored in etcd, what the
// REST API speaks (JSON), and what crosses tiers (converted to and from the
// protobuf messages in proto/ by package apiproto, at the gRPC edge).
//
// Every type that comes from a user has a Validate method that names the
// offending field. Lifecycle states and their allowed transitions live in
// phase.go, in one place.
package api
