package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// configFiles owns the files of replicas' Configs and Secrets, one
// directory per replica under root (StateDir/configs) and in it one per
// container of its pod (main, and each init container and sidecar that
// mounts any): written afresh by every Apply that creates the
// containers, removed with the replica. Each container has its own, so
// that each gets only its own files, owned by the user it runs as.
type configFiles struct{ root string }

// dir holds the files of replica id's Configs and Secrets.
func (cf *configFiles) dir(id string) string { return filepath.Join(cf.root, id) }

// containerDir holds those of container name of replica id's pod
// (api.MainContainer: the main container's).
func (cf *configFiles) containerDir(id, name string) string { return filepath.Join(cf.dir(id), name) }

// remove removes replica id's files, every container's.
func (cf *configFiles) remove(id string) error { return os.RemoveAll(cf.dir(id)) }

type configDataKey struct{}

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

// mounts writes files, those of container name of replica id, afresh
// (one directory per mount path, files only root may write) and returns
// their read-only mounts.
func (cf *configFiles) mounts(id, name string, files []provider.File) ([]specs.Mount, error) {
	root := cf.containerDir(id, name)
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	var mounts []specs.Mount
	for _, f := range files {
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

// memberData is the data of pod container name, as ConfigData of its
// own, from the Apply's data d (nil: it has none, and its environment
// is its spec's).
func memberData(d *provider.ConfigData, name string) *provider.ConfigData {
	if d == nil {
		return nil
	}
	cd, ok := d.Containers[name]
	if !ok {
		return nil
	}
	return &provider.ConfigData{Env: cd.Env, Files: cd.Files}
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

// envOf is a container's environment: the data's (the spec's env with
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

// withFilesOwner gives the files of a replica's Configs and Secrets in
// dir (mode 0444 and 0400, see configFiles.mounts) to the user its
// process runs as, on the host: a process that is not root reads its
// secrets too.
func withFilesOwner(dir string, pol userPolicy) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		var uid, gid uint32
		if s.Process != nil {
			uid, gid = s.Process.User.UID, s.Process.User.GID
		}
		hostUID, hostGID, ok := pol.hostIDs(uid, gid)
		if !ok || (hostUID == 0 && hostGID == 0) {
			return nil // checkUser refuses the first; root owns them already
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			return os.Lchown(path, int(hostUID), int(hostGID))
		})
		if errors.Is(err, fs.ErrNotExist) {
			return nil // no files
		}
		return err
	}
}
