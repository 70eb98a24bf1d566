package election

import "context"

// SetProbe replaces e's probe of a leader's address. Call it before Run.
func SetProbe(e *Elector, probe func(ctx context.Context, addr string) error) { e.probe = probe }

// DeadRounds returns how many rounds e's dead-leader watch has made.
func DeadRounds(e *Elector) int64 { return e.deadRounds.Load() }
