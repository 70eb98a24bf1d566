#!/usr/bin/env bash
# Regenerates the Go code for every .proto under proto/. Run by `make proto`.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$(go env GOPATH)/bin:$PATH"
for plugin in protoc-gen-go protoc-gen-go-grpc; do
  command -v "$plugin" >/dev/null || { echo "missing $plugin: run 'make tools'" >&2; exit 1; }
done
protos=$(find . -name '*.proto' | sort)
protoc -I . -I /usr/include \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  $protos
