package containerd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	dockerconfig "github.com/containerd/containerd/v2/core/remotes/docker/config"
	remoteserrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/stratahq/strata/internal/api"
)

// RegistryHost is how the provider reaches one registry (the agent's
// config: providers[].options.registryHosts.<host>).
type RegistryHost struct {
	// CA is a PEM file of the CAs that sign the registry's certificate
	// (default: the system's).
	CA string
	// Username and PasswordFile are the registry's credentials (basic
	// auth, or a token service's). The password file is read at every
	// pull, so that a rotated password needs no restart; it never
	// appears in logs or statuses.
	Username     string
	PasswordFile string
	// PlainHTTP reaches the registry over HTTP, unencrypted: for a
	// registry on the node's loopback or a trusted segment only.
	PlainHTTP bool
}

// validateRegistryHosts checks that every registry with settings is
// allowed and that its files can be read.
func (c Config) validateRegistryHosts() error {
	for host, h := range c.RegistryHosts {
		field := "registryHosts." + host
		if !slices.ContainsFunc(c.Registries, func(r string) bool { return strings.EqualFold(r, host) }) {
			return api.Invalid(field, "%s is not in registries: list it there to allow pulls from it", host)
		}
		if h.CA != "" {
			if _, err := h.tlsConfig(); err != nil {
				return api.Invalid(field+".ca", "%v", err)
			}
		}
		if (h.Username == "") != (h.PasswordFile == "") {
			return api.Invalid(field, "username and passwordFile go together")
		}
		if h.PasswordFile != "" {
			if _, err := h.password(); err != nil {
				return api.Invalid(field+".passwordFile", "%v", err)
			}
		}
	}
	return nil
}

func (h RegistryHost) tlsConfig() (*tls.Config, error) {
	if h.CA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(h.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", h.CA)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (h RegistryHost) password() (string, error) {
	b, err := os.ReadFile(h.PasswordFile)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// registryHost returns the settings of host, the zero ones if none.
func (c Config) registryHost(host string) RegistryHost {
	for k, h := range c.RegistryHosts {
		if strings.EqualFold(k, host) {
			return h
		}
	}
	return RegistryHost{}
}

// resolver reaches host with its settings.
func (im *imageService) resolver(ctx context.Context, host string) (docker.RegistryHosts, error) {
	h := im.cfg.registryHost(host)
	auth, err := pullAuthFor(ctx, host)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := h.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", host, err)
	}
	// HTTPS unless told otherwise, also for a registry on loopback
	// (containerd's default there is HTTP, and HTTPS unverified).
	opts := dockerconfig.HostOptions{DefaultTLS: tlsCfg, DefaultScheme: "https"}
	if h.PlainHTTP {
		opts.DefaultScheme = "http"
	}
	switch {
	case auth != nil:
		// The tenant's registry Secret, over the node's credentials.
		opts.Credentials = func(string) (string, string, error) { return auth.Username, auth.Password, nil }
	case h.Username != "":
		opts.Credentials = func(string) (string, string, error) {
			pw, err := h.password()
			if err != nil {
				return "", "", fmt.Errorf("registry %s: password file: %w", host, err)
			}
			return h.Username, pw, nil
		}
	}
	return dockerconfig.ConfigureHosts(ctx, opts), nil
}

// pullProgress reports how far a pull is, every interval, through
// report, from the content this pull fetches: the blobs it has asked
// for, done or being written.
type pullProgress struct {
	mu    sync.Mutex
	blobs []ocispec.Descriptor
}

// handler records the blobs a pull fetches.
func (pp *pullProgress) handler(_ context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	pp.mu.Lock()
	pp.blobs = append(pp.blobs, desc)
	pp.mu.Unlock()
	return nil, nil
}

// measure returns the bytes fetched and known of the blobs so far.
func (pp *pullProgress) measure(ctx context.Context, c *client.Client) (done, total int64) {
	pp.mu.Lock()
	blobs := slices.Clone(pp.blobs)
	pp.mu.Unlock()
	cs := c.ContentStore()
	active := map[string]int64{}
	if sts, err := cs.ListStatuses(ctx); err == nil {
		for _, st := range sts {
			active[st.Expected.String()] = st.Offset
		}
	}
	for _, b := range blobs {
		total += b.Size
		if off, ok := active[b.Digest.String()]; ok {
			done += off
		} else if _, err := cs.Info(ctx, b.Digest); err == nil {
			done += b.Size
		}
	}
	return done, total
}

// follow calls report with the progress every interval until ctx ends.
func (pp *pullProgress) follow(ctx context.Context, c *client.Client, interval time.Duration, report func(done, total int64)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			report(pp.measure(ctx, c))
		}
	}
}

// pullWith pulls ref from host with its settings, calling progress with
// a line on how far it is while it runs.
func (im *imageService) pullWith(ctx context.Context, ref, host string, progress func(string)) (client.Image, error) {
	hosts, err := im.resolver(ctx, host)
	if err != nil {
		return nil, err
	}
	pp := &pullProgress{}
	fctx, stop := context.WithCancel(ctx)
	var following sync.WaitGroup
	if progress != nil {
		following.Go(func() {
			pp.follow(fctx, im.client, im.cfg.PullProgressInterval, func(done, total int64) {
				progress(fmt.Sprintf("pulling image %s: %.1f of %.1f MiB", ref, float64(done)/(1<<20), float64(total)/(1<<20)))
			})
		})
	}
	img, err := im.client.Pull(ctx, ref,
		client.WithPullUnpack,
		client.WithPullSnapshotter(im.cfg.Snapshotter),
		client.WithResolver(docker.NewResolver(docker.ResolverOptions{Hosts: hosts})),
		client.WithImageHandler(images.HandlerFunc(pp.handler)),
	)
	// No progress after the answer: the replica's next status is the
	// Apply's.
	stop()
	following.Wait()
	if err != nil {
		whose := "the node's credentials"
		if auth, _ := pullAuthFor(ctx, host); auth != nil {
			whose = "the pull secret's credentials"
		}
		return nil, pullError(ref, host, whose, err)
	}
	return img, nil
}

// pullError says why a pull failed in words a tenant can act on.
func pullError(ref, host, whose string, err error) error {
	var status remoteserrors.ErrUnexpectedStatus
	switch {
	case errdefs.IsUnauthorized(err), errors.As(err, &status) && status.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("pull %s: registry %s refused %s (401 Unauthorized)", ref, host, whose)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("pull %s: not found in registry %s", ref, host)
	}
	return fmt.Errorf("pull %s: %w", ref, err)
}
