package haproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// lbState is a load balancer as the provider keeps it on disk, one JSON
// file per load balancer in <stateDir>/lbs, so that an agent restart
// recovers what it applied (List) without asking anyone.
type lbState struct {
	ID         string                `json:"id"`
	Kind       api.ResourceKind      `json:"kind"`
	Generation int64                 `json:"generation"`
	Spec       *api.LoadbalancerSpec `json:"spec"`
	Endpoints  []api.Endpoint        `json:"endpoints,omitempty"`
	// Error says why haproxy does not serve it (an invalid spec, a port
	// it cannot bind); a new generation or a retry clears it.
	Error string `json:"error,omitempty"`
}

// runningState records what the running master loaded, so that an agent
// restart knows whether its configuration still needs a reload.
type runningState struct {
	PID         int               `json:"pid"`
	Structure   string            `json:"structure"`
	LBStructure map[string]string `json:"lbStructure"`
}

// stateFile names a load balancer's file: its id when that is a safe
// file name, else a hash (the id is inside the file either way).
func stateFile(dir, id string) string {
	name := id
	if len(id) > 100 || sanitize(id) != id || strings.HasPrefix(id, ".") || strings.HasPrefix(id, "x-") {
		name = "x-" + hashString(id)[:32]
	}
	return filepath.Join(dir, name+".json")
}

func saveLB(dir string, s *lbState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("save load balancer %s: %w", s.ID, err)
	}
	return writeFileAtomic(stateFile(dir, s.ID), b, 0o600)
}

func removeLB(dir, id string) error {
	if err := os.Remove(stateFile(dir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove load balancer %s: %w", id, err)
	}
	return nil
}

// loadLBs reads every load balancer file. A file that cannot be read is
// an error: dropping it silently would orphan its frontends.
func loadLBs(dir string) ([]*lbState, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("load balancers: %w", err)
	}
	var out []*lbState
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", e.Name(), err)
		}
		var s lbState
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", e.Name(), err)
		}
		if s.ID == "" {
			return nil, fmt.Errorf("load balancer %s: no id", e.Name())
		}
		out = append(out, &s)
	}
	return out, nil
}

func saveRunning(path string, r runningState) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("save running state: %w", err)
	}
	return writeFileAtomic(path, b, 0o600)
}

func loadRunning(path string) (runningState, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return runningState{}, false
	}
	var r runningState
	if json.Unmarshal(b, &r) != nil {
		return runningState{}, false
	}
	return r, true
}
