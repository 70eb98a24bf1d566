package monitor

import (
	"errors"

	"github.com/stratahq/strata/internal/store"
)

func isFenced(err error) bool { return errors.Is(err, store.ErrFenced) }
