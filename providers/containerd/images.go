package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/distribution/reference"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// labelArchive on an imported image names the archive it came from (a
// digest of its path, size and modification time, or of its URL), so
// that a provider made after an agent restart does not import it again.
const labelArchive = "strata.io/archive"

// importPrefix names images of an archive whose manifests carry no name.
const importPrefix = "import.strata.io/archive"

// imageService owns the images of replicas: it imports archives (by
// path from ImageDirs or downloaded from ArchiveURLs) and pulls
// references from Registries, each at most once however many replicas
// ask at the same time (locks, by source), unpacks them for the
// snapshotter, and makes their user namespace remaps. Under mu it caches
// what it found (archives imported, images unpacked, the client's image
// objects), which containerd would otherwise be asked again for every
// replica.
type imageService struct {
	cfg    Config
	log    *slog.Logger
	client *client.Client
	// What tenants may reach on the host: archive files and URLs.
	dirs    hostpolicy.Dirs
	fetcher *hostpolicy.Fetcher
	// locks make concurrent Applies of one image import or pull it
	// once, and remap it once.
	locks *keyedLocks

	mu       sync.Mutex
	imported map[string]string // image source key → image name in containerd
	// unpacked holds the images (by manifest digest) found unpacked for
	// the snapshotter: their snapshots stay while the image does.
	unpacked map[string]bool
	// images are the client's images by name (see imageOf).
	images  map[string]client.Image
	imports int // archives imported, for tests
}

// newImageService returns the image service of cfg; its client is set
// once connected.
func newImageService(cfg Config, log *slog.Logger) (*imageService, error) {
	dirs, err := cfg.dirs()
	if err != nil {
		return nil, err
	}
	fetcher, err := cfg.fetcher()
	if err != nil {
		return nil, err
	}
	return &imageService{
		cfg: cfg, log: log, dirs: dirs, fetcher: fetcher, locks: newKeyedLocks(),
		imported: map[string]string{}, unpacked: map[string]bool{}, images: map[string]client.Image{},
	}, nil
}

// imageSource is where a replica's image comes from: an archive to import
// (ref, when set, picks one of its images) or a reference to pull.
type imageSource struct {
	ref     string
	archive string
}

func sourceOf(a *api.Assignment) (imageSource, error) {
	var s imageSource
	if a.Image != nil {
		s.ref, s.archive = a.Image.Ref, a.Image.Archive
	}
	if s.ref == "" && s.archive == "" && a.Spec.Compute != nil {
		// No Image resource: the spec names an OCI reference to pull.
		s.ref = a.Spec.Compute.Image
	}
	if s.ref == "" && s.archive == "" {
		return s, errors.New("no image: set spec.compute.image or an Image resource")
	}
	return s, nil
}

// ensure makes the image of a available and unpacked for the
// snapshotter, importing or pulling it at most once however many
// replicas ask at the same time; progress (optional) hears how a pull
// goes.
func (im *imageService) ensure(ctx context.Context, src imageSource, progress func(string)) (client.Image, error) {
	lockKey := src.archive
	if lockKey == "" {
		lockKey = "ref:" + src.ref
	}
	unlock, err := im.locks.lock(ctx, lockKey)
	if err != nil {
		return nil, err
	}
	defer unlock()

	var img client.Image
	if src.archive != "" {
		img, err = im.importArchive(ctx, src)
	} else {
		img, err = im.pull(ctx, src.ref, progress)
	}
	if err != nil {
		return nil, err
	}
	if err := im.unpack(ctx, img); err != nil {
		return nil, err
	}
	return img, nil
}

// unpack makes img's snapshots for the snapshotter, unless it was
// found unpacked before: checking costs several reads of containerd's
// content store for every replica.
func (im *imageService) unpack(ctx context.Context, img client.Image) error {
	key := img.Target().Digest.String()
	im.mu.Lock()
	done := im.unpacked[key]
	im.mu.Unlock()
	if done {
		return nil
	}
	unpacked, err := img.IsUnpacked(ctx, im.cfg.Snapshotter)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Name(), err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, im.cfg.Snapshotter); err != nil {
			return fmt.Errorf("unpack %s for %s: %w", img.Name(), im.cfg.Snapshotter, err)
		}
	}
	im.mu.Lock()
	im.unpacked[key] = true
	im.mu.Unlock()
	return nil
}

// forgetUnpacked makes the next unpack of img check its snapshots
// again (they were removed by hand, or the image was deleted).
func (im *imageService) forgetUnpacked(img client.Image) {
	im.mu.Lock()
	delete(im.unpacked, img.Target().Digest.String())
	im.mu.Unlock()
}

// pull returns the image ref, pulling it only from a registry of
// Config.Registries, reached with its RegistryHosts settings; progress
// hears how far the pull is while it runs.
func (im *imageService) pull(ctx context.Context, ref string, progress func(string)) (client.Image, error) {
	img, err := im.get(ctx, ref)
	if err == nil {
		return img, nil
	}
	if !isNotFound(err) {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	host, err := im.registryAllowed(ref)
	if err != nil {
		im.log.Warn("image pull refused", "ref", ref, "err", err)
		return nil, errPullRefused
	}
	im.log.Info("pulling image", "ref", ref, "registry", host)
	start := time.Now()
	img, err = im.pullWith(ctx, ref, host, progress)
	if err != nil {
		im.log.Warn("image pull failed", "ref", ref, "err", err)
		return nil, err
	}
	im.log.Info("pulled image", "ref", ref, "took", time.Since(start).Round(time.Millisecond))
	im.forgetUnpacked(img)
	return img, nil
}

// registryAllowed checks the registry of ref against Config.Registries
// and returns its host.
func (im *imageService) registryAllowed(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not an image reference: %v", hostpolicy.ErrNotAllowed, ref, err)
	}
	host := reference.Domain(named)
	for _, r := range im.cfg.Registries {
		if strings.EqualFold(r, host) {
			return host, nil
		}
	}
	return "", fmt.Errorf("%w: registry %s is not in this node's registries", hostpolicy.ErrNotAllowed, host)
}

// importArchive imports src's archive unless this provider, or an
// earlier one in this namespace, already did. The caller holds the
// archive's image lock.
func (im *imageService) importArchive(ctx context.Context, src imageSource) (client.Image, error) {
	path, key, err := im.localArchive(ctx, src.archive)
	if err != nil {
		return nil, err
	}
	cacheKey := key + "\x00" + src.ref
	im.mu.Lock()
	name, ok := im.imported[cacheKey]
	im.mu.Unlock()
	if ok {
		img, err := im.get(ctx, name)
		if err == nil {
			return img, nil
		}
		if !isNotFound(err) {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		// Deleted behind our back: import again.
	}

	imgs, err := im.client.ImageService().List(ctx, fmt.Sprintf("labels.%q==%q", labelArchive, key))
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	if len(imgs) == 0 {
		imgs, err = im.importFile(ctx, path, key)
		if err != nil {
			return nil, err
		}
	}
	chosen, err := pickImage(imgs, src.ref)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", src.archive, err)
	}
	im.mu.Lock()
	im.imported[cacheKey] = chosen.Name
	im.mu.Unlock()
	return im.imageOf(chosen), nil
}

// get returns the image named name, as client.GetImage does.
func (im *imageService) get(ctx context.Context, name string) (client.Image, error) {
	rec, err := im.client.ImageService().Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return im.imageOf(rec), nil
}

// imageOf returns the client's image of rec, the same one while rec's
// name points to the same manifest: it keeps what it read of the
// manifest (its layers), which every container's snapshot needs.
func (im *imageService) imageOf(rec images.Image) client.Image {
	im.mu.Lock()
	defer im.mu.Unlock()
	if img, ok := im.images[rec.Name]; ok && img.Target().Digest == rec.Target.Digest {
		return img
	}
	img := client.NewImage(im.client, rec)
	im.images[rec.Name] = img
	return img
}

func (im *imageService) importFile(ctx context.Context, path, key string) ([]images.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	im.log.Info("importing image archive", "archive", path)
	imgs, err := im.client.Import(ctx, f,
		client.WithImageLabels(map[string]string{labelArchive: key}),
		// Name the images of unnamed manifests by digest; named ones
		// keep only their name.
		client.WithDigestRef(archive.DigestTranslator(importPrefix)),
		client.WithSkipDigestRef(func(name string) bool { return name != "" }),
	)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	im.mu.Lock()
	im.imports++
	for _, img := range imgs {
		// Imported anew: snapshots of an earlier import may be gone.
		delete(im.unpacked, img.Target.Digest.String())
	}
	im.mu.Unlock()
	return imgs, nil
}

// pickImage chooses the image named ref among an archive's images, or
// its first named image when ref is empty.
func pickImage(imgs []images.Image, ref string) (images.Image, error) {
	if len(imgs) == 0 {
		return images.Image{}, errors.New("holds no image")
	}
	if ref == "" {
		for _, img := range imgs {
			if !strings.HasPrefix(img.Name, importPrefix) {
				return img, nil
			}
		}
		return imgs[0], nil
	}
	names := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if img.Name == ref {
			return img, nil
		}
		names = append(names, img.Name)
	}
	return images.Image{}, fmt.Errorf("has no image %s (it has %s)", ref, strings.Join(names, ", "))
}

// errArchiveRefused is all a tenant learns of an archive it may not
// have, or that is missing, whatever the cause: the node's log says
// which. A different answer per cause would tell which host files exist
// and which addresses answer.
var errArchiveRefused = errors.New("image archive not allowed or not found")

// errPullRefused is the same for an image reference that is neither in
// the namespace nor from an allowed registry.
var errPullRefused = errors.New("image not found and its registry is not allowed on this node")

// localArchive returns a local path of an archive, downloading an http(s)
// URL into the state directory once, and the key that identifies its
// content. The archive must be a file in Config.ImageDirs or a URL of
// Config.ArchiveURLs; any refusal is errArchiveRefused, with the cause
// in the log.
func (im *imageService) localArchive(ctx context.Context, src string) (path, key string, err error) {
	path, key, err = im.resolveArchive(ctx, src)
	if errors.Is(err, hostpolicy.ErrNotAllowed) {
		im.log.Warn("image archive refused", "archive", redactArchive(src), "err", err)
		return "", "", errArchiveRefused
	}
	return path, key, err
}

func (im *imageService) resolveArchive(ctx context.Context, src string) (path, key string, err error) {
	if u, perr := url.Parse(src); perr == nil && u.Scheme != "" && u.Scheme != "file" {
		if err := im.fetcher.Allowed(u); err != nil {
			return "", "", err
		}
		sum := sha256.Sum256([]byte(src))
		key = hex.EncodeToString(sum[:])[:32]
		path = filepath.Join(im.cfg.StateDir, "images", key+".tar")
		if _, err := os.Stat(path); err == nil {
			return path, key, nil
		}
		if err := im.download(ctx, src, path); err != nil {
			return "", "", err
		}
		return path, key, nil
	}
	path, err = im.dirs.Resolve(src)
	if err != nil {
		return "", "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", hostpolicy.ErrNotAllowed, err)
	}
	// A rebuilt archive at the same path is a new image: its size or
	// time changed.
	sum := sha256.Sum256([]byte(path + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)))
	return path, hex.EncodeToString(sum[:])[:32], nil
}

// redactArchive is an archive's name for the log: a URL without its
// credentials or query.
func redactArchive(src string) string {
	if u, err := url.Parse(src); err == nil && u.Scheme != "" {
		return hostpolicy.Redact(u)
	}
	return src
}

// download writes the URL src to path atomically, through the fetcher
// (allowlist, address checks, size and time bounds).
func (im *imageService) download(ctx context.Context, src, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := im.fetcher.Fetch(ctx, src, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}
