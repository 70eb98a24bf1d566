package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"
)

// budgets is the most each step of the suite may take. They are several
// times what the step takes on a quiet 2-core machine, so that load slows
// a row down without failing it; past its budget a row ends with an error
// that the report gives as "did not finish", never as a hang, and the
// suite goes on with the next.
var budgets = map[string]time.Duration{
	"B7": 6 * time.Minute, "B9": 5 * time.Minute, "A2": 4 * time.Minute,
	"N1": 6 * time.Minute, "N2": 4 * time.Minute, "N3": 6 * time.Minute,
	"C1": 8 * time.Minute, "V1": 8 * time.Minute,
	// P2: three runs of the e2e test, about 90 s each.
	"P1": 4 * time.Minute, "P2": 12 * time.Minute,
	// A1: three runs of the e2e test with two load steps, about 3 min
	// each.
	"A1": 15 * time.Minute,
	// DNS1: 2 servers × 2 loads × 7 s a round; DNS3: a few seconds a run.
	"DNS1": 4 * time.Minute, "DNS3": 3 * time.Minute,
	// A cluster's start includes B0 and, in production, 1,000 agents'
	// certificates and connections.
	"cluster": 6 * time.Minute,
	"B2":      4 * time.Minute, "B1": 12 * time.Minute, "B4": 6 * time.Minute,
	// B3 at half of B1's rate: three runs of 15 s of creates, each
	// cleaned up after.
	"B3half": 8 * time.Minute,
	"B10":    10 * time.Minute, "B5": 8 * time.Minute, "B8": 10 * time.Minute,
}

// withBudget runs f under step's budget, logs how long it took (label
// names it in the log), and, when the budget is what stopped it, says so
// in the error.
func withBudget(ctx context.Context, step, label string, f func(context.Context) error) error {
	began := time.Now()
	defer func() { log.Printf("bench: %s took %s", label, time.Since(began).Round(time.Second)) }()
	budget := budgets[step]
	if budget == 0 {
		return f(ctx)
	}
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	err := f(bctx)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("%w (the run stopped: %v)", err, context.Cause(ctx))
	case errors.Is(bctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("over its %s budget: %w", budget, err)
	}
	return err
}
