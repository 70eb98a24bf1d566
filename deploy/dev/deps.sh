#!/usr/bin/env bash
# Installs what Strata's tests and `strata dev` need on Debian, and starts
# the daemons the tests use when they are not running. Idempotent: a second
# run changes nothing. Needs root.
set -euo pipefail

log() { printf '[deps] %s\n' "$*"; }
die() { printf '[deps] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"
command -v go >/dev/null || die "Go 1.26 or newer is required (https://go.dev/dl/); it is not on PATH"

STATE_DIR=${STRATA_DEPS_DIR:-/var/lib/strata-dev}
LOG_DIR=$STATE_DIR/log
mkdir -p "$STATE_DIR" "$LOG_DIR"

PACKAGES=(
  containerd runc containernetworking-plugins busybox-static
  redis-server haproxy
  libvirt-daemon-system libvirt-dev qemu-system-x86 qemu-utils
  cpio protobuf-compiler libprotobuf-dev iproute2 iptables
  chromium
  ca-certificates curl git
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$LOG_DIR/apt.log" 2>&1 \
    || { tail -20 "$LOG_DIR/apt.log"; die "apt-get install failed (log: $LOG_DIR/apt.log)"; }
else
  log "packages present"
fi

# Package installs may start daemons through policy-rc.d-less scripts on
# some images; the checks below only start what is not answering.

# containerd: the Debian unit is not run (no systemd), so start it.
if ! ctr --timeout 2s version >/dev/null 2>&1; then
  log "starting containerd"
  nohup containerd >"$LOG_DIR/containerd.log" 2>&1 &
  for _ in $(seq 1 100); do ctr --timeout 1s version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr --timeout 2s version >/dev/null 2>&1 || { tail -20 "$LOG_DIR/containerd.log"; die "containerd did not start"; }
else
  log "containerd running"
fi

# KVM: /dev/kvm may exist without working (nested virtualisation off).
# Ask QEMU itself: boot a 5-byte boot sector that writes to the debug-exit
# port; QEMU exits with 99 only if the guest really ran under KVM.
kvm_works() {
  [ -e /dev/kvm ] || return 1
  local img=$STATE_DIR/kvm-probe.img
  [ -f "$img" ] || { printf '\xb0\x31\xe6\xf4\xf4' >"$img"; truncate -s 510 "$img"; printf '\x55\xaa' >>"$img"; }
  local rc=0
  timeout 20 qemu-system-x86_64 -accel kvm -machine pc -nodefaults -display none -m 16 \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 -drive file="$img",format=raw,if=floppy -boot a \
    >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 99 ]
}

if ! pgrep -x virtlogd >/dev/null; then
  log "starting virtlogd"
  virtlogd -d
fi
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  if kvm_works; then
    log "starting libvirtd (KVM works)"
    libvirtd -d
  else
    # libvirtd re-probes QEMU's capabilities on every domain create while
    # it sees a /dev/kvm that does not work (~45 s each). Hiding the
    # broken device in libvirtd's own mount namespace makes it settle on
    # TCG once and cache that.
    log "starting libvirtd with the broken /dev/kvm hidden (TCG only)"
    if [ -e /dev/kvm ]; then
      unshare -m --propagation private sh -c 'mount --bind /dev/null /dev/kvm && exec libvirtd -d'
    else
      libvirtd -d
    fi
  fi
  for _ in $(seq 1 100); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.1; done
  virsh -c qemu:///system version >/dev/null 2>&1 || die "libvirtd did not answer on qemu:///system"
else
  log "libvirtd running"
fi

log "ready"
