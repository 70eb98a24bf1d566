# Strata's build. The whole set-up on a fresh Debian machine, as root, is
# `make dev` (build and run the all-in-one cluster) and `make test`
# (install what the tests need, then run them).

GO       ?= go
GOBIN    := $(shell $(GO) env GOPATH)/bin
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/stratahq/strata/internal/version.Version=$(VERSION)
DEV_DIR  ?= .dev
# Debian versions must start with a digit; a tag v1.2.3 gives 1.2.3.
DEB_VERSION ?= $(shell v=$$(git describe --tags --exact-match 2>/dev/null) && echo $${v\#v} || echo 0.0~git$$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null).$$(git rev-parse --short HEAD 2>/dev/null))
# Tests that drive real daemons run one package at a time so that they do
# not fight over containerd, libvirt and the CPU on a 2-core machine.
TEST_P   ?= 2
# The fuzz targets, package:Target:executions, one per decoder of client
# input (REST bodies, query parameters, manifests, label selectors, strict
# JSON). make test runs each, one at a time, for its count of executions
# times FUZZ_SCALE; make bench for BENCH_FUZZ_SCALE times it.
#
# A budget is a count (-fuzztime Nx), never a duration. With a duration,
# Go's fuzz coordinator (up to Go 1.26, golang/go#75804, fixed in 1.27)
# can fail a run that found nothing, with "context deadline exceeded" and
# no input written: -fuzztime becomes a context deadline, the workers'
# context is its child, and a context closes its own Done channel before
# it cancels its children; a coordinator that wakes in between sees the
# deadline while the workers' context is not yet cancelled, and takes the
# deadline for an error (internal/fuzz/fuzz.go, stop). A count sets no
# deadline: the coordinator stops itself once the workers have made that
# many calls, and cancels the workers' context before anyone looks at it.
# A real crash still fails the run and writes its input under the
# package's testdata/fuzz. The counts are about 5 s each on a loaded
# 2-core machine (5 x 5 s: under a minute of fuzzing; the seed and cached
# inputs count too); BENCH_FUZZ_SCALE 24 is about 2 minutes each.
FUZZ_TARGETS := ./internal/strictjson:FuzzDecode:40000 ./internal/api:FuzzParseSelector:40000 \
	./cli/manifest:FuzzParse:15000 ./global/api:FuzzRESTBodies:3000 ./global/api:FuzzRESTQueries:4000 \
	./internal/dns:FuzzParseName:20000
FUZZ_SCALE ?= 1
BENCH_FUZZ_SCALE ?= 24
TEST_TIMEOUT ?= 20m
# make stress: how often each package runs, and which packages: those that
# drive real daemons (etcd, Redis, containerd, libvirt, HAProxy, the strata
# binaries) or real timing.
STRESS_COUNT ?= 5
STRESS_PKGS  ?= ./providers/containerd ./providers/haproxy ./providers/libvirt ./providers/provider/... ./providers/fake/... \
	./internal/heartbeat/... ./internal/events/... ./testkit/redistest ./internal/redisclient ./internal/store/... \
	./internal/election ./internal/etcdserver/... ./internal/liveness ./internal/transport ./internal/serving \
	./devcluster ./internal/reconcile ./cli/... \
	./agent/... ./region/... ./global/... ./cmd/... ./e2e/...

PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
STATICCHECK        := honnef.co/go/tools/cmd/staticcheck@v0.6.1
GOCYCLO            := github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0
# Most branches a function may have (cyclomatic complexity): past it, split
# the function into named steps. Tests, generated code and test-helper
# packages (storetest, eventstest, ...) are exempt.
MAX_COMPLEXITY     := 15

export PATH := $(GOBIN):$(PATH)

.PHONY: all chaos build build-core build-libvirt deb dev dev-clean deps tools proto proto-check lint test test-unit test-security fuzz stress bench clean images help

all: build

CHAOS_SEEDS  ?= 5
CHAOS_TIMEOUT ?= 120m

## help: this list
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## build: strata, strata-agent, stratactl, the libvirt provider plugin (cgo), a real etcd server for tests,
##        and etcdctl and etcdutl (backup and restore, docs/operations.md)
build: build-core build-libvirt
	$(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	$(GO) build -o $(BIN)/etcdctl go.etcd.io/etcd/etcdctl/v3
	$(GO) build -o $(BIN)/etcdutl go.etcd.io/etcd/etcdutl/v3

## build-core: strata, strata-agent (the agent alone: what nodes run) and stratactl (pure Go, statically linked)
build-core:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/strata ./cmd/strata
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/strata-agent ./cmd/strata-agent
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/stratactl ./cmd/stratactl

## build-libvirt: the libvirt provider plugin (cgo; needs libvirt-dev)
build-libvirt:
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/strata-provider-libvirt ./cmd/strata-provider-libvirt

## deb: Debian packages strata (with strata-agent), stratactl and strata-provider-libvirt in dist/ (tools/deb, nfpm;
##      configurations in deploy/package). DEB_VERSION defaults to 0.0~git<date>.<commit>
deb: build-core build-libvirt
	$(GO) run ./tools/deb -bin $(BIN) -out dist -version $(DEB_VERSION)

## dev: the first command on a fresh machine: as root, install what the real providers need
##      (deploy/dev/deps.sh dev), build, and run the all-in-one cluster (Ctrl-C stops it; data stays
##      in $(DEV_DIR)). Real containers, load balancers and VMs where the machine has them, the fake
##      provider for the rest; never fails for a missing package (deploy/dev/up.sh)
dev:
	./deploy/dev/up.sh $(DEV_DIR)

## dev-clean: stop what the dev cluster left running (containers, VMs, haproxy) and remove $(DEV_DIR)
dev-clean:
	./deploy/dev/clean.sh $(DEV_DIR)

## deps: install the Debian packages and start the daemons the tests need
deps:
	./deploy/dev/deps.sh

## images: the busybox OCI archive (containers) and the kernel + initramfs (VMs), built offline
images:
	./deploy/dev/images.sh .cache/images
	./deploy/dev/vm-image.sh .cache/vm

## tools: protoc plugins and staticcheck, from the Go module proxy
tools:
	@command -v protoc-gen-go >/dev/null || $(GO) install $(PROTOC_GEN_GO)
	@command -v protoc-gen-go-grpc >/dev/null || $(GO) install $(PROTOC_GEN_GO_GRPC)
	@command -v staticcheck >/dev/null || $(GO) install $(STATICCHECK) || echo "staticcheck did not install; lint runs without it"

## proto: regenerate the Go code from proto/
proto: tools
	./proto/generate.sh

## proto-check: fail when the committed generated code is stale
proto-check: tools
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  cp -r proto $$tmp/ && $$tmp/proto/generate.sh && \
	  if ! diff -r -q proto $$tmp/proto >/dev/null; then \
	    diff -r proto $$tmp/proto | head -20; \
	    echo "generated protobuf code is stale: run 'make proto' and commit"; exit 1; fi

## lint: gofmt, go vet, staticcheck, function complexity, stale generated code, and imports that point up a floor (tools/layers)
lint: proto-check
	@bad=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	  if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	@out=$$($(GO) run $(GOCYCLO) -over $(MAX_COMPLEXITY) -ignore '_test\.go$$|\.pb\.go$$|[a-z]test/' . 2>&1); \
	  if [ $$? -ne 0 ]; then echo "functions above cyclomatic complexity $(MAX_COMPLEXITY) (split them):"; echo "$$out"; exit 1; fi
	$(GO) run ./tools/layers
	@if command -v staticcheck >/dev/null; then staticcheck ./...; else echo "staticcheck not installed; skipped"; fi

## test: everything CI runs (installs dependencies first, idempotently)
test: deps tools build images lint
	$(GO) test -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) fuzz

## fuzz: run every fuzz target (FUZZ_TARGETS) for its count of executions times FUZZ_SCALE (default 1:
##       about 5 s each), one at a time; a crash, a panic or a 5xx fails it (its input is saved under the
##       package's testdata/fuzz)
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; n=$$(( $${rest#*:} * $(FUZZ_SCALE) )); \
	  echo "fuzz $$fn in $$pkg for $$n executions"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $${n}x $$pkg || exit 1; \
	done

## test-security: the security suite: every TestSecurity* test, the attacks of e2e/security
##      replayed on real processes included (make test runs them too)
test-security: build
	$(GO) test -count=1 -p $(TEST_P) -run 'TestSecurity' ./...

## chaos: every fault scenario of e2e/chaos on $(CHAOS_SEEDS) seeds, as root (network namespaces):
##        real strata, etcd, Redis and haproxy processes under load; writes docs/reliability.md.
##        About 30 s a scenario and seed on 2 cores, 80 s for global-tier-down (13 scenarios x 5 seeds: about 35 minutes)
chaos: build-core
	$(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3
	STRATA_CHAOS_SCENARIOS=all STRATA_CHAOS_SEEDS=$(CHAOS_SEEDS) STRATA_CHAOS_REPORT=$(CURDIR)/docs/reliability.md \
	  $(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -run 'TestChaos$$' ./e2e/chaos

## test-unit: the fast tests only (no real daemons)
test-unit:
	$(GO) test -short -count=1 ./...

## stress: hunt flakes: run each package of STRESS_PKGS (those driving real daemons or real timing)
##         STRESS_COUNT times (default 5), one package at a time, a fresh process each run; print each
##         test's failure count (output of failing runs in .cache/stress/failures.log); fail if any failed
stress: deps build images
	$(GO) run ./testkit/testenv/stress -count $(STRESS_COUNT) -timeout $(TEST_TIMEOUT) $(STRESS_PKGS)

## bench: the benchmark suite (B0-B10 on a production-shaped and a light cluster, containers, VMs, network
##        N1-N3, probes P1-P2); each row the median of 3 or more runs; writes docs/benchmarks.md and CPU profiles of B1, heap and goroutine profiles of B6 (.cache/profiles)
bench: deps build images
	$(MAKE) fuzz FUZZ_SCALE=$(BENCH_FUZZ_SCALE)
	$(GO) run ./bench -out docs/benchmarks.md -profiles .cache/profiles

clean:
	rm -rf $(BIN)
