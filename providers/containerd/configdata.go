package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

var _ provider.ConfigApplier = (*Provider)(nil)

type configDataKey struct{}

// ApplyConfig is Apply with the data of the Configs and Secrets a's spec
// names: its files are written under the replica's state directory
// (configs/<id>/<n>/<key>, owned by root, 0444 for a Config's, 0400 for
// a Secret's) and bind-mounted read-only, its variables set, and the
// image pulled with its registry credentials. The data rides on the
// call's context down to the steps that use it; nothing of it is logged
// or put in a status.
func (p *Provider) ApplyConfig(ctx context.Context, a *api.Assignment, d *provider.ConfigData) (api.AssignmentStatus, error) {
	return p.Apply(context.WithValue(ctx, configDataKey{}, d), a)
}

// configDataOf is the data of the Apply running in ctx (nil: none).
func configDataOf(ctx context.Context) *provider.ConfigData {
	d, _ := ctx.Value(configDataKey{}).(*provider.ConfigData)
	return d
}

// configDigest digests d, so that a Config or Secret that changes
// recreates the container; "" without data.
func configDigest(d *provider.ConfigData) (string, error) {
	if d == nil {
		return "", nil
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("config digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// configsDir holds the files of replica id's Configs and Secrets.
func (p *Provider) configsDir(id string) string { return filepath.Join(p.cfg.StateDir, "configs", id) }

// configMounts writes the files of d afresh (one directory per mount
// path, files only root may write) and returns their read-only mounts.
func (p *Provider) configMounts(id string, d *provider.ConfigData) ([]specs.Mount, error) {
	root := p.configsDir(id)
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if d == nil || len(d.Files) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	var mounts []specs.Mount
	for _, f := range d.Files {
		dir, ok := dirs[f.Dir]
		if !ok {
			dir = filepath.Join(root, strconv.Itoa(len(dirs)))
			if err := os.Mkdir(dir, 0o555); err != nil {
				return nil, err
			}
			dirs[f.Dir] = dir
			mounts = append(mounts, specs.Mount{Destination: f.Dir, Type: "bind", Source: dir, Options: []string{"rbind", "ro"}})
		}
		if strings.ContainsRune(f.Name, '/') || f.Name == "." || f.Name == ".." {
			return nil, fmt.Errorf("file name %q is not a key", f.Name)
		}
		mode := os.FileMode(0o444)
		if f.Secret {
			mode = 0o400
		}
		if err := writeMode(filepath.Join(dir, f.Name), f.Data, mode); err != nil {
			return nil, err
		}
	}
	// The directory the container sees must not be writable by anyone
	// but root on the host either.
	return mounts, nil
}

// writeMode writes a new file with mode (whatever the umask).
func writeMode(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(path, mode)
	}
	return err
}

// envOf is the replica's environment: the data's (the spec's env with
// envFrom over it) when there is data, else the spec's.
func envOf(ctx context.Context, c api.ComputeSpec) map[string]string {
	if d := configDataOf(ctx); d != nil {
		return d.Env
	}
	return c.Env
}

// pullAuthFor is the registry credentials of the Apply in ctx for host:
// nil when it has none; an error when they are for another registry.
func pullAuthFor(ctx context.Context, host string) (*provider.RegistryAuth, error) {
	d := configDataOf(ctx)
	if d == nil || d.PullAuth == nil {
		return nil, nil
	}
	if !strings.EqualFold(d.PullAuth.Host, host) {
		return nil, fmt.Errorf("the pull secret is for registry %s, the image is from %s", d.PullAuth.Host, host)
	}
	return d.PullAuth, nil
}
