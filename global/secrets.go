package global

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/proto/apiproto"
)

// ReencryptSecrets seals again, with the first of cfg's key files, every
// Secret in the global etcd of cfg that an older key sealed (the last
// step of a key rotation, see globalapi.ReencryptSecrets).
func ReencryptSecrets(ctx context.Context, cfg *config.Global, log *slog.Logger) (globalapi.Reencryption, error) {
	if len(cfg.Secrets.KeyFiles) == 0 {
		return globalapi.Reencryption{}, errors.New("secrets.keyFiles names no key file: nothing to encrypt with")
	}
	ring, err := secretbox.LoadKeyring(cfg.Secrets.KeyFiles)
	if err != nil {
		return globalapi.Reencryption{}, err
	}
	cli, closeEtcd, err := etcdserver.Open(ctx, "global", cfg.Etcd)
	if err != nil {
		return globalapi.Reencryption{}, fmt.Errorf("global: %w", err)
	}
	defer closeEtcd()
	st := state.NewWriting(store.New(cli, cfg.Etcd.Prefix, store.WithLogger(log), store.WithMaxTxnOps(cfg.Etcd.MaxTxnOps)), apiproto.WriteFormat(cfg.Etcd.JSONValues))
	return globalapi.ReencryptSecrets(ctx, st, ring)
}
