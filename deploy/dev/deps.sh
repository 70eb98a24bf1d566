#!/usr/bin/env bash
# Installs what Strata's tests and `strata dev` need on Debian, and starts
# the daemons the tests use when they are not running. Idempotent: a second
# run changes nothing. Needs root.
#
#   deploy/dev/deps.sh          # everything `make test` needs
#   deploy/dev/deps.sh dev      # only what the real providers of `make dev` need
set -euo pipefail

PROFILE=${1:-test}
case $PROFILE in test | dev) ;; *) echo "usage: $0 [test|dev]" >&2; exit 2 ;; esac

# fail: the tests need everything (a missing piece fails them, never skips
# them under CI), while `make dev` starts with whatever this machine has
# and says what it lacks.
fail() {
  if [ "$PROFILE" = dev ]; then printf '[deps] warning: %s; going on without it\n' "$*" >&2; return 0; fi
  die "$@"
}

log() { printf '[deps] %s\n' "$*"; }
die() { printf '[deps] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"
command -v go >/dev/null || die "Go 1.26 or newer is required (https://go.dev/dl/); it is not on PATH"

STATE_DIR=${STRATA_DEPS_DIR:-/var/lib/strata-dev}
LOG_DIR=$STATE_DIR/log
mkdir -p "$STATE_DIR" "$LOG_DIR"

# The providers' packages: containers (containerd, runc, CNI, the busybox
# image), load balancers (haproxy), VMs (libvirt, QEMU, the plugin's cgo
# library, cpio for the initramfs).
PACKAGES=(
  containerd runc containernetworking-plugins busybox-static iproute2 iptables
  haproxy
  libvirt-daemon-system libvirt-dev qemu-system-x86 qemu-utils cpio
)
# What only the tests need: Redis, protoc for the stale-code check,
# Chromium for the console tests, systemd (systemd-analyze, systemd-sysusers)
# for the package test, unbound for the DNS1 benchmark's baseline (`make
# bench` runs an instance of its own; the package's service is not used).
if [ "$PROFILE" = test ]; then
  PACKAGES+=(redis-server protobuf-compiler libprotobuf-dev chromium ca-certificates curl git systemd unbound)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${#missing[@]} Debian packages (a few minutes the first time): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get update -qq >"$LOG_DIR/apt-update.log" 2>&1; then
    tail -5 "$LOG_DIR/apt-update.log" >&2
    fail "apt-get update failed (log: $LOG_DIR/apt-update.log)"
  elif ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$LOG_DIR/apt.log" 2>&1; then
    tail -20 "$LOG_DIR/apt.log" >&2
    fail "apt-get install failed (log: $LOG_DIR/apt.log)"
  fi
else
  log "packages present"
fi

# unbound is there for its binary: if installing it just now started its
# service (a machine with systemd and no policy-rc.d), stop it again, so
# that deps leave no resolver of theirs on port 53. A machine that already
# had unbound keeps it as it was.
if [[ " ${missing[*]} " == *" unbound "* ]] && command -v systemctl >/dev/null && systemctl is-active --quiet unbound 2>/dev/null; then
  log "stopping the unbound service the package started (the DNS1 benchmark runs its own)"
  systemctl disable --now unbound.service unbound-resolvconf.service >/dev/null 2>&1 || true
fi

# Package installs may start daemons through policy-rc.d-less scripts on
# some images; the checks below only start what is not answering.

# containerd: the Debian unit is not run (no systemd), so start it.
if ! command -v containerd >/dev/null; then
  fail "containerd is not installed"
elif ! ctr --timeout 2s version >/dev/null 2>&1; then
  log "starting containerd"
  nohup containerd >"$LOG_DIR/containerd.log" 2>&1 &
  for _ in $(seq 1 100); do ctr --timeout 1s version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr --timeout 2s version >/dev/null 2>&1 || { tail -20 "$LOG_DIR/containerd.log" >&2; fail "containerd did not start"; }
else
  log "containerd running"
fi

# KVM: /dev/kvm may exist without running guests: nested virtualisation
# off, or a KVM flavour (PVM) that runs boot sectors but hangs stock
# kernels after their real-mode setup. Boot the kernel the VMs use: KVM
# works only if it prints its banner (it then panics for want of a root,
# and -no-reboot ends QEMU).
kvm_works() {
  [ -e /dev/kvm ] || return 1
  local images out=$STATE_DIR/kvm-probe.log
  images=$("$(dirname "$0")/vm-image.sh" "$(dirname "$0")/../../.cache/vm" 2>>"$LOG_DIR/vm-image.log") || return 1
  rm -f "$out"
  timeout 10 qemu-system-x86_64 -accel kvm -machine pc -nodefaults -display none -m 128 -no-reboot \
    -serial "file:$out" -kernel "$images/vmlinuz" -append "console=ttyS0 earlyprintk=ttyS0 panic=-1" \
    >/dev/null 2>&1 || true
  grep -q 'Linux version' "$out" 2>/dev/null
}

start_libvirtd() {
  if ! pgrep -x virtlogd >/dev/null; then
    log "starting virtlogd"
    virtlogd -d
  fi
  if virsh -c qemu:///system version >/dev/null 2>&1; then
    log "libvirtd running"
    return 0
  fi
  if kvm_works; then
    log "starting libvirtd (KVM works)"
    libvirtd -d
  else
    # libvirtd takes KVM as usable when /dev/kvm is read-write for the
    # QEMU user and re-probes QEMU (~2 s, ~13 times per domain start) for
    # as long as QEMU disagrees: /dev/null over /dev/kvm is that case. A
    # character device nobody may open makes both say "no KVM". (Not a
    # regular file: libvirt copies /dev/kvm into each domain's /dev.)
    log "starting libvirtd with the broken /dev/kvm hidden (TCG only)"
    if [ -e /dev/kvm ]; then
      nokvm=$STATE_DIR/no-kvm
      [ -c "$nokvm" ] || { rm -f "$nokvm"; mknod -m 000 "$nokvm" c 1 3; }
      unshare -m --propagation private sh -c "mount --bind '$nokvm' /dev/kvm && exec libvirtd -d"
    else
      libvirtd -d
    fi
  fi
  for _ in $(seq 1 100); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.1; done
  virsh -c qemu:///system version >/dev/null 2>&1 || fail "libvirtd did not answer on qemu:///system"
}
if command -v libvirtd >/dev/null && command -v virsh >/dev/null; then
  start_libvirtd
else
  fail "libvirtd is not installed"
fi

log "ready"
