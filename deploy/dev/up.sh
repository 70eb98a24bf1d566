#!/usr/bin/env bash
# `make dev`: brings the all-in-one dev cluster up on this machine, as the
# first command on a fresh Debian machine or the hundredth.
#
#   deploy/dev/up.sh [DATA_DIR] [strata dev flags...]     # default .dev
#
# 1. As root with apt-get: installs and starts what the real providers need
#    (deploy/dev/deps.sh dev: containerd, runc, CNI, haproxy, libvirt,
#    QEMU). Not root, no apt-get, offline, STRATA_DEV_DEPS=skip: installs
#    nothing and says so.
# 2. Builds bin/strata, bin/strata-agent and bin/stratactl (pure Go), and the libvirt plugin
#    where libvirt-dev is installed.
# 3. Builds the busybox image archive and the VM kernel where it can.
# 4. Runs `strata dev`, which uses a real provider for each kind where this
#    machine has it and the fake provider for the rest, one line saying
#    which and why.
#
# Nothing but a missing Go toolchain or a failing build of Strata itself
# stops it. A second run reuses everything and is up in seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."

DATA_DIR=${1:-.dev}
shift || true
GO=${GO:-go}
step() { printf '[dev] %s\n' "$*" >&2; }
note() { printf '[dev] note: %s\n' "$*" >&2; }
die() { printf '[dev] error: %s\n' "$*" >&2; exit 1; }

command -v "$GO" >/dev/null || die "Go 1.26 or newer is required (https://go.dev/dl/); it is not on PATH"

# 1. The providers' packages and daemons.
if [ "${STRATA_DEV_DEPS:-auto}" = skip ]; then
  note "STRATA_DEV_DEPS=skip: not installing packages; using what this machine has"
elif [ "$(id -u)" != 0 ]; then
  note "not root: not installing packages or starting daemons; using what this machine has"
elif ! command -v apt-get >/dev/null; then
  note "no apt-get: not installing packages; using what this machine has"
else
  step "dependencies: deploy/dev/deps.sh dev (packages and daemons for containers, load balancers, VMs; idempotent)"
  ./deploy/dev/deps.sh dev || note "deploy/dev/deps.sh did not finish; using what this machine has"
fi

# 2. Binaries.
step "building bin/strata, bin/strata-agent and bin/stratactl"
make -s build-core || die "building strata failed"
if command -v pkg-config >/dev/null && pkg-config --exists libvirt 2>/dev/null; then
  step "building bin/strata-provider-libvirt (cgo)"
  make -s build-libvirt || note "building the libvirt plugin failed; VMs fall back to the fake provider"
else
  # A plugin left from an earlier build would no longer match strata.
  rm -f bin/strata-provider-libvirt
  note "libvirt-dev is not installed: bin/strata-provider-libvirt is not built"
fi

# 3. Images: the busybox archive the tour imports, the kernel VMs boot.
step "image archive .cache/images/busybox-oci.tar"
./deploy/dev/images.sh .cache/images >/dev/null || note "no busybox image archive (install busybox-static); the tour's Image resource will fail on containerd nodes"
step "VM kernel and initramfs in .cache/vm"
./deploy/dev/vm-image.sh .cache/vm >/dev/null || note "no VM kernel (needs apt-get and the Debian archive); VMs need a kernel of your own"

# 4. The cluster.
step "starting strata dev (data in $DATA_DIR)"
exec ./bin/strata dev --data-dir "$DATA_DIR" "$@"
