package dns

import (
	"sync"
)

// cacheEntries bounds the answer cache: past it, the cache starts over
// (a replica asking random names cannot grow it).
const cacheEntries = 4096

// answerCache keeps the packed in-zone answers the server sent over UDP,
// by tenant and by the query's bytes but its id (question as asked, case
// included, flags, EDNS0 size: everything the reply depends on), for as
// long as the table does not change: a replica's repeated lookup then
// costs a map read and a copy instead of unpacking the query, a lookup, a
// new message and its packing.
type answerCache struct {
	mu  sync.RWMutex
	gen uint64
	n   int
	m   map[string]map[string]cachedAnswer // tenant → query bytes[2:]
}

type cachedAnswer struct {
	msg    []byte
	result string
}

// get returns the answer cached for tenant's query q (its bytes, id
// included) at table generation gen, in dst with q's id.
func (c *answerCache) get(tenant string, q []byte, gen uint64, dst []byte) ([]byte, string, bool) {
	if len(q) < 12 {
		return nil, "", false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.gen != gen {
		return nil, "", false
	}
	a, ok := c.m[tenant][string(q[2:])]
	if !ok {
		return nil, "", false
	}
	dst = append(dst[:0], a.msg...)
	dst[0], dst[1] = q[0], q[1]
	return dst, a.result, true
}

// put keeps msg, computed at table generation gen, for tenant's query q;
// an answer of an older generation than the cache's is dropped, a newer
// one starts the cache over, and so does a full cache.
func (c *answerCache) put(tenant string, q []byte, gen uint64, msg []byte, result string) {
	if len(q) < 12 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case gen < c.gen:
		return
	case gen > c.gen || c.m == nil || c.n >= cacheEntries:
		c.gen, c.n, c.m = gen, 0, make(map[string]map[string]cachedAnswer)
	}
	byQuery := c.m[tenant]
	if byQuery == nil {
		byQuery = make(map[string]cachedAnswer)
		c.m[tenant] = byQuery
	}
	key := string(q[2:])
	if _, ok := byQuery[key]; !ok {
		c.n++
	}
	byQuery[key] = cachedAnswer{msg: msg, result: result}
}

// len is the number of answers cached.
func (c *answerCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n
}
