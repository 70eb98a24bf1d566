package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestSecretsReencrypt rotates the key of a real etcd's Secrets with the
// commands an operator runs: keygen, then reencrypt with the new key
// first; etcd's bytes then name the new key and hold no value in clear.
func TestSecretsReencrypt(t *testing.T) {
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for _, f := range []string{oldFile, newFile} {
		if out, err := runStrata(t, "secrets", "keygen", "--out", f); err != nil || !strings.Contains(out, "key id") {
			t.Fatalf("keygen: %s %v", out, err)
		}
	}
	if _, err := runStrata(t, "secrets", "keygen", "--out", oldFile); err == nil {
		t.Fatal("keygen overwrote a key file")
	}
	eps := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, eps), "/strata/global/"))
	oldRing, err := secretbox.LoadKeyring([]string{oldFile})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := globalapi.New(globalapi.Options{State: st, ID: "g", Secrets: oldRing})
	if err != nil {
		t.Fatal(err)
	}
	ctx := globalapi.WithIdentity(t.Context(), globalapi.Identity{Tenant: "t", Role: api.RoleMember})
	const value = "plain-Canary-41"
	if _, err := svc.Secrets().Create(ctx, "", api.Secret{Name: "s", Data: map[string]string{"k": value}}); err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(dir, "global.yaml")
	yaml := fmt.Sprintf("etcd:\n  endpoints: [%s]\n  prefix: /strata/global/\nsecrets:\n  keyFiles: [%s, %s]\n", eps[0], newFile, oldFile)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runStrata(t, "secrets", "reencrypt", "--config", cfg)
	newKey, _ := secretbox.ReadKeyFile(newFile)
	if err != nil || !strings.Contains(out, "1 secrets, 1 re-encrypted; 0 alert rules, 0 receiver secrets re-encrypted; all now under key "+newKey.ID) {
		t.Fatalf("reencrypt: %q %v", out, err)
	}
	kv, err := st.Store.Get(t.Context(), st.Secrets.Key("t/s"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(kv.Value, []byte(`"keyID":"`+newKey.ID+`"`)) || bytes.Contains(kv.Value, []byte(value)) {
		t.Fatalf("etcd holds %s; want the new key id and no plain value", kv.Value)
	}
	if out, _ := runStrata(t, "secrets", "reencrypt", "--config", cfg); !strings.Contains(out, "0 re-encrypted") {
		t.Fatalf("second reencrypt: %q; want 0 re-encrypted", out)
	}
}
