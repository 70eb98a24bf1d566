package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys, for namespace ns:
//
//	{ns}:hb        sorted set: member = ID, score = At in unix microseconds.
//	               Stale is one ZRANGE BYSCORE, List one ZRANGE; members
//	               stay until Forget, so a dead node never disappears by
//	               itself.
//	{ns}:hb:<id>   hash: at, seq, m:<metric> and a:<attr> fields of the last beat,
//	               with a TTL so forgotten-about nodes do not keep metrics
//	               forever.
//
// The {ns} hash tag puts every key of a namespace in one cluster slot, so
// the record script and the pipelines are legal on Redis Cluster too.
// Microseconds (not milliseconds) keep the score an exact float64 integer
// (< 2^53) while ordering beats that arrive within the same millisecond.

// recordScript applies a beat unless a newer one is stored, atomically, so
// concurrent API replicas cannot let a late, older beat win. It compares
// against the sorted-set score, which outlives the hash's TTL.
//
// KEYS: zset, hash. ARGV: id, at (µs), ttl (ms), seq, then metric and
// attribute field/value pairs. Returns 1 if applied, 0 if a newer beat was kept.
const recordScript = `
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if cur and tonumber(cur) > tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'at', ARGV[2], 'seq', ARGV[4], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`

const (
	fieldAt      = "at"
	fieldSeq     = "seq"
	metricPrefix = "m:"
	attrPrefix   = "a:"
	// readChunk bounds how many HGETALLs go into one pipeline, so a huge
	// namespace does not build one giant request and reply in memory.
	readChunk = 4096
)

// Redis is a Store in Redis; see the key layout above.
type Redis struct {
	cli    redis.UniversalClient
	cfg    config
	zset   string
	prefix string // of the per-ID hashes
	script *redis.Script
}

var _ Store = (*Redis)(nil)

// NewRedis returns a store that keeps its keys under namespace (e.g. the
// region name, or "global"); an empty namespace means "strata".
func NewRedis(cli redis.UniversalClient, namespace string, opts ...Option) *Redis {
	if namespace == "" {
		namespace = "strata"
	}
	base := "{" + namespace + "}:hb"
	return &Redis{
		cli:    cli,
		cfg:    newConfig(opts),
		zset:   base,
		prefix: base + ":",
		script: redis.NewScript(recordScript),
	}
}

// Record implements Store.
func (r *Redis) Record(ctx context.Context, b Beat) error {
	return r.RecordBatch(ctx, []Beat{b})
}

// RecordBatch implements Store: one pipeline of script calls.
func (r *Redis) RecordBatch(ctx context.Context, beats []Beat) error {
	if len(beats) == 0 {
		return ctx.Err()
	}
	type call struct {
		keys []string
		args []any
	}
	calls := make([]call, len(beats))
	ttl := max(r.cfg.ttl.Milliseconds(), 1)
	for i, b := range beats {
		b, err := normalize(b, r.cfg.now)
		if err != nil {
			return err
		}
		args := make([]any, 0, 4+2*len(b.Metrics)+2*len(b.Attrs))
		args = append(args, b.ID, b.At.UnixMicro(), ttl, b.Seq)
		for k, v := range b.Metrics {
			args = append(args, metricPrefix+k, strconv.FormatFloat(v, 'g', -1, 64))
		}
		for k, v := range b.Attrs {
			args = append(args, attrPrefix+k, v)
		}
		calls[i] = call{keys: []string{r.zset, r.prefix + b.ID}, args: args}
	}
	run := func() ([]redis.Cmder, error) {
		return r.cli.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				p.EvalSha(ctx, r.script.Hash(), c.keys, c.args...)
			}
			return nil
		})
	}
	cmds, err := run()
	if err != nil && noScript(cmds) {
		// The script cache is empty after a Redis restart or failover.
		// Load and replay the whole batch: recording is idempotent.
		r.cfg.logger.InfoContext(ctx, "heartbeat: loading record script", "namespace", r.zset)
		if lerr := r.script.Load(ctx, r.cli).Err(); lerr != nil {
			return fmt.Errorf("heartbeat: load record script: %w", lerr)
		}
		_, err = run()
	}
	if err != nil {
		return fmt.Errorf("heartbeat: record %d beats: %w", len(beats), err)
	}
	return nil
}

func noScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// Get implements Store: score and hash in one round trip.
func (r *Redis) Get(ctx context.Context, id string) (Beat, error) {
	var score *redis.FloatCmd
	var fields *redis.MapStringStringCmd
	_, err := r.cli.Pipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, r.zset, id)
		fields = p.HGetAll(ctx, r.prefix+id)
		return nil
	})
	if errors.Is(score.Err(), redis.Nil) {
		return Beat{}, ErrNotFound
	}
	if err != nil {
		return Beat{}, fmt.Errorf("heartbeat: get %q: %w", id, err)
	}
	return r.decode(ctx, id, score.Val(), fields.Val()), nil
}

// List implements Store: one ZRANGE plus pipelined HGETALLs.
func (r *Redis) List(ctx context.Context) ([]Beat, error) {
	zs, err := r.cli.ZRangeWithScores(ctx, r.zset, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: list: %w", err)
	}
	out, err := r.fill(ctx, zs)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: list: %w", err)
	}
	return out, nil
}

// Times implements Store: the sorted set's scores are the beats' times,
// exactly (microseconds fit a float64's mantissa).
func (r *Redis) Times(ctx context.Context) (map[string]time.Time, error) {
	zs, err := r.cli.ZRangeWithScores(ctx, r.zset, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: times: %w", err)
	}
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		if id, ok := z.Member.(string); ok {
			out[id] = time.UnixMicro(int64(math.Round(z.Score))).UTC()
		}
	}
	return out, nil
}

// Stale implements Store: one ZRANGE BYSCORE plus pipelined HGETALLs.
func (r *Redis) Stale(ctx context.Context, olderThan time.Time) ([]Beat, error) {
	// Scores are whole microseconds; "before olderThan" for a truncated At
	// means "below olderThan rounded up to the next microsecond".
	limit := olderThan.UnixMicro()
	if olderThan.Truncate(time.Microsecond).Before(olderThan) {
		limit++
	}
	zs, err := r.cli.ZRangeByScoreWithScores(ctx, r.zset, &redis.ZRangeBy{
		Min: "-inf",
		Max: "(" + strconv.FormatInt(limit, 10),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("heartbeat: stale: %w", err)
	}
	beats, err := r.fill(ctx, zs)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: stale: %w", err)
	}
	// A beat recorded between the two round trips makes its hash newer
	// than the score we selected on; such an ID is no longer stale.
	out := beats[:0]
	for _, b := range beats {
		if b.At.Before(olderThan) {
			out = append(out, b)
		}
	}
	return out, nil
}

// Forget implements Store.
func (r *Redis) Forget(ctx context.Context, id string) error {
	_, err := r.cli.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, r.zset, id)
		p.Del(ctx, r.prefix+id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("heartbeat: forget %q: %w", id, err)
	}
	return nil
}

// fill reads the hashes of zs (in pipelined chunks) and keeps zs's order.
func (r *Redis) fill(ctx context.Context, zs []redis.Z) ([]Beat, error) {
	out := make([]Beat, 0, len(zs))
	cmds := make([]*redis.MapStringStringCmd, 0, min(len(zs), readChunk))
	for start := 0; start < len(zs); start += readChunk {
		chunk := zs[start:min(start+readChunk, len(zs))]
		cmds = cmds[:0]
		_, err := r.cli.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, z := range chunk {
				cmds = append(cmds, p.HGetAll(ctx, r.prefix+z.Member.(string)))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, z := range chunk {
			out = append(out, r.decode(ctx, z.Member.(string), z.Score, cmds[i].Val()))
		}
	}
	return out, nil
}

// decode builds a beat from its score and hash. The hash wins when present
// because it was written together with Seq, Metrics and Attrs; an expired hash
// leaves only the score.
func (r *Redis) decode(ctx context.Context, id string, score float64, h map[string]string) Beat {
	b := Beat{ID: id, At: time.UnixMicro(int64(math.Round(score))).UTC()}
	for k, v := range h {
		var err error
		switch {
		case k == fieldAt:
			var us int64
			if us, err = strconv.ParseInt(v, 10, 64); err == nil {
				b.At = time.UnixMicro(us).UTC()
			}
		case k == fieldSeq:
			b.Seq, err = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(k, metricPrefix):
			var f float64
			if f, err = strconv.ParseFloat(v, 64); err == nil {
				if b.Metrics == nil {
					b.Metrics = make(map[string]float64, len(h))
				}
				b.Metrics[strings.TrimPrefix(k, metricPrefix)] = f
			}
		case strings.HasPrefix(k, attrPrefix):
			if b.Attrs == nil {
				b.Attrs = make(map[string]string, len(h))
			}
			b.Attrs[strings.TrimPrefix(k, attrPrefix)] = v
		}
		if err != nil {
			// Only another writer could have put this there; skipping the
			// field keeps the monitor working on the rest.
			r.cfg.logger.WarnContext(ctx, "heartbeat: bad field in redis hash", "id", id, "field", k, "err", err)
		}
	}
	return b
}
