package config

import (
	"io"
	"log/slog"
)

// Logger builds the structured logger this configuration asks for.
func (l Log) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Validate checks the level and format.
func (l Log) Validate() error { return l.validate() }
