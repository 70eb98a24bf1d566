package dns

import (
	"sync"

	mdns "github.com/miekg/dns"
)

// cacheEntries bounds the answer cache: past it, the cache starts over
// (a replica asking random names cannot grow it).
const cacheEntries = 4096

// answerCache keeps the packed in-zone answers the server sent, by
// question as asked, tenant and what else shapes the reply, for as long
// as the table does not change: a replica's repeated lookup then costs a
// map read and a copy instead of a lookup, a new message and its
// packing.
type answerCache struct {
	mu  sync.RWMutex
	gen uint64
	m   map[cacheKey]cachedAnswer
}

// cacheKey is everything a reply depends on but its id: the question as
// asked (case kept, resolvers randomize it), the tenant, the flags the
// reply echoes, and its transport and size.
type cacheKey struct {
	tenant, name   string
	qtype, qclass  uint16
	rd, cd         bool
	udp            bool
	size           uint16
	edns, ednsSize uint16
}

type cachedAnswer struct {
	msg    []byte
	result string
}

// keyOf is the cache key of req from tenant; size is its UDP size (0 over
// TCP).
func keyOf(tenant string, req *mdns.Msg, size int) cacheKey {
	q := req.Question[0]
	k := cacheKey{tenant: tenant, name: q.Name, qtype: q.Qtype, qclass: q.Qclass, rd: req.RecursionDesired, cd: req.CheckingDisabled, udp: size > 0, size: uint16(size)}
	if opt := req.IsEdns0(); opt != nil {
		k.edns, k.ednsSize = 1, opt.UDPSize()
	}
	return k
}

// get returns the answer cached for k at table generation gen, with a
// fresh id.
func (c *answerCache) get(k cacheKey, gen uint64, id uint16) ([]byte, string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.gen != gen {
		return nil, "", false
	}
	a, ok := c.m[k]
	if !ok {
		return nil, "", false
	}
	b := make([]byte, len(a.msg))
	copy(b, a.msg)
	b[0], b[1] = byte(id>>8), byte(id)
	return b, a.result, true
}

// put keeps msg, computed at table generation gen, for k; an answer of an
// older generation than the cache's is dropped, a newer one starts the
// cache over.
func (c *answerCache) put(k cacheKey, gen uint64, msg []byte, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case gen < c.gen:
		return
	case gen > c.gen || c.m == nil || len(c.m) >= cacheEntries:
		c.gen, c.m = gen, make(map[cacheKey]cachedAnswer)
	}
	c.m[k] = cachedAnswer{msg: msg, result: result}
}
