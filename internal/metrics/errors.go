package metrics

import (
	"errors"

	"github.com/stratahq/strata/internal/api"
)

func isNotFound(err error) bool { return errors.Is(err, api.ErrNotFound) }
