package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"

	"github.com/stratahq/strata/internal/api"
)

// labelArchive on an imported image names the archive it came from (a
// digest of its path, size and modification time, or of its URL), so
// that a provider made after an agent restart does not import it again.
const labelArchive = "strata.io/archive"

// importPrefix names images of an archive whose manifests carry no name.
const importPrefix = "import.strata.io/archive"

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

// ensureImage makes the image of a available and unpacked for the
// snapshotter, importing or pulling it at most once however many
// replicas ask at the same time.
func (p *Provider) ensureImage(ctx context.Context, src imageSource) (client.Image, error) {
	lockKey := src.archive
	if lockKey == "" {
		lockKey = "ref:" + src.ref
	}
	unlock, err := p.imageLocks.lock(ctx, lockKey)
	if err != nil {
		return nil, err
	}
	defer unlock()

	var img client.Image
	if src.archive != "" {
		img, err = p.importArchive(ctx, src)
	} else {
		img, err = p.pull(ctx, src.ref)
	}
	if err != nil {
		return nil, err
	}
	unpacked, err := img.IsUnpacked(ctx, p.cfg.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Name(), err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, p.cfg.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpack %s for %s: %w", img.Name(), p.cfg.Snapshotter, err)
		}
	}
	return img, nil
}

func (p *Provider) pull(ctx context.Context, ref string) (client.Image, error) {
	img, err := p.client.GetImage(ctx, ref)
	if err == nil {
		return img, nil
	}
	if !isNotFound(err) {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	p.log.Info("pulling image", "ref", ref)
	img, err = p.client.Pull(ctx, ref, client.WithPullUnpack, client.WithPullSnapshotter(p.cfg.Snapshotter))
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, nil
}

// importArchive imports src's archive unless this provider, or an
// earlier one in this namespace, already did. The caller holds the
// archive's image lock.
func (p *Provider) importArchive(ctx context.Context, src imageSource) (client.Image, error) {
	path, key, err := p.localArchive(ctx, src.archive)
	if err != nil {
		return nil, err
	}
	cacheKey := key + "\x00" + src.ref
	p.mu.Lock()
	name, ok := p.imported[cacheKey]
	p.mu.Unlock()
	if ok {
		img, err := p.client.GetImage(ctx, name)
		if err == nil {
			return img, nil
		}
		if !isNotFound(err) {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		// Deleted behind our back: import again.
	}

	imgs, err := p.client.ImageService().List(ctx, fmt.Sprintf("labels.%q==%q", labelArchive, key))
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	if len(imgs) == 0 {
		imgs, err = p.importFile(ctx, path, key)
		if err != nil {
			return nil, err
		}
	}
	chosen, err := pickImage(imgs, src.ref)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", src.archive, err)
	}
	p.mu.Lock()
	p.imported[cacheKey] = chosen.Name
	p.mu.Unlock()
	return client.NewImage(p.client, chosen), nil
}

func (p *Provider) importFile(ctx context.Context, path, key string) ([]images.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	p.log.Info("importing image archive", "archive", path)
	imgs, err := p.client.Import(ctx, f,
		client.WithImageLabels(map[string]string{labelArchive: key}),
		// Name the images of unnamed manifests by digest; named ones
		// keep only their name.
		client.WithDigestRef(archive.DigestTranslator(importPrefix)),
		client.WithSkipDigestRef(func(name string) bool { return name != "" }),
	)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	p.mu.Lock()
	p.imports++
	p.mu.Unlock()
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

// localArchive returns a local path of an archive, downloading an http(s)
// URL into the state directory once, and the key that identifies its
// content.
func (p *Provider) localArchive(ctx context.Context, src string) (path, key string, err error) {
	if u, perr := url.Parse(src); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
		sum := sha256.Sum256([]byte(src))
		key = hex.EncodeToString(sum[:])[:32]
		path = filepath.Join(p.cfg.StateDir, "images", key+".tar")
		if _, err := os.Stat(path); err == nil {
			return path, key, nil
		}
		if err := download(ctx, src, path); err != nil {
			return "", "", err
		}
		return path, key, nil
	}
	path = strings.TrimPrefix(src, "file://")
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("archive: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("archive: %w", err)
	}
	// A rebuilt archive at the same path is a new image: its size or
	// time changed.
	sum := sha256.Sum256([]byte(abs + "\x00" + strconv.FormatInt(fi.Size(), 10) + "\x00" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)))
	return path, hex.EncodeToString(sum[:])[:32], nil
}

// download writes url to path atomically.
func download(ctx context.Context, src, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: %s", src, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, resp.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("download %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("download %s: %w", src, err)
	}
	return nil
}
