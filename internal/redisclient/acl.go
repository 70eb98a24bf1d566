package redisclient

import "strings"

// ACLRules are the ACL rules of a tier's Redis user: the keys Strata
// uses (heartbeats under {strata:…}, event streams under strata:…), no
// pub/sub channels, and only the commands the heartbeat and event stores
// send — including those the heartbeat store's Lua script calls, which
// ACL checks too. docs/operations.md gives them as an ACL SETUSER line;
// the conformance suites run as a user with exactly these rules.
var ACLRules = []string{
	"resetkeys", "~strata:*", "~{strata:*",
	"resetchannels",
	"-@all",
	// heartbeats: the record script and its loading, reads, Forget
	"+evalsha", "+script|load",
	"+zadd", "+zscore", "+zrange", "+zrangebyscore", "+zrem",
	"+hset", "+hgetall", "+del", "+pexpire",
	"+multi", "+exec",
	// Cluster mode: the client learns which node holds which slots, and
	// where each command's keys are (COMMAND: metadata only)
	"+cluster|slots", "+command",
	// events
	"+xadd", "+xrange", "+xrevrange", "+xread",
}

// ACLSetUser is the ACL SETUSER command for user, with the password left
// for the operator to fill in.
func ACLSetUser(user string) string {
	return "ACL SETUSER " + user + " on >PASSWORD " + strings.Join(ACLRules, " ")
}
