package redisclient

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SetLogger sends go-redis's own log lines — failed dials while Redis is
// down, Sentinel switching masters, Cluster slots moving — to l as
// structured records (component=redis), instead of the plain
// "redis: 2026/…" lines go-redis prints on stderr by default, which break a
// JSON log.
//
// go-redis keeps its logger in a package variable: there is one per
// process, shared by every client. So only a program's main calls this,
// once, at start (cmd/strata does, before it builds any tier); library
// code never does, because the last caller would take over the logging of
// every client in the process — `strata dev` runs all tiers in one.
func SetLogger(l *slog.Logger) {
	redis.SetLogger(&logger{l: l.With("component", "redis")})
}

// logger adapts slog to go-redis's Printf-style interface.
type logger struct{ l *slog.Logger }

// infoPrefixes are go-redis lines that report a change going right; every
// other line reports something failing.
var infoPrefixes = []string{
	"sentinel: new master",
	"sentinel: discovered new sentinel",
	"sentinel: selected addr",
	"cluster: slots",
	"pubsub: reconnecting",
}

func (g *logger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: ")
	level := slog.LevelWarn
	for _, p := range infoPrefixes {
		if strings.HasPrefix(msg, p) {
			level = slog.LevelInfo
			break
		}
	}
	g.l.Log(ctx, level, msg)
}
