#!/usr/bin/env bash
# Builds the kernel and initramfs that the libvirt provider's tests and
# `strata dev` boot, with no image registry: Debian's cloud kernel from the
# apt archive, and a busybox initramfs.
#
#   deploy/dev/vm-image.sh [DIR]     # default .cache/vm
#
# Writes DIR/vmlinuz and DIR/initramfs.gz and prints DIR. The initramfs's
# /init mounts proc, sys and dev, loads the virtio, ACPI button and pvpanic
# modules (they are modules, not built in, in the cloud kernel),
# configures eth0 from the kernel's ip= argument (the cloud kernel has no
# IP_PNP, so it never does), prints its disks and `ip addr`, then the
# marker line
#
#   STRATA-VM-READY <hostname> <ip>
#
# (just before it, when the domain has the QEMU guest agent's channel,
# it starts qemu-ga on it: Debian's qemu-guest-agent, with the host's
# copies of the libraries it links),
# on the console, and stays up; the ACPI power button powers it off, so a
# graceful shutdown does not have to wait for a forced one. Before the
# marker it mounts the files of the provider's config drive read-only and
# takes its environment; with a command on the drive, it runs it after
# the marker, writes its exit code on the exit disk and powers off. With
# strata.panic on the kernel command line it panics after the marker
# instead, for tests of crash reporting.
#
# Idempotent: nothing is downloaded or rebuilt when DIR holds the output of
# this script for the archive's current kernel. Needs apt-get (an `apt-get
# update` is run only when the kernel cannot be resolved), dpkg-deb, cpio,
# gzip and busybox-static; BUSYBOX overrides the binary.
set -euo pipefail

log() { printf '[vm-image] %s\n' "$*" >&2; }
die() { printf '[vm-image] error: %s\n' "$*" >&2; exit 1; }

DIR=${1:-.cache/vm}
BUSYBOX=${BUSYBOX:-/bin/busybox}
META=linux-image-cloud-amd64
# The modules /init loads, in this order; their dependencies come along.
# pvpanic tells QEMU of a kernel panic, which libvirt reports as a crash.
# virtio_console: the guest agent's virtio-serial channel.
MODULES=(virtio_pci virtio_net virtio_blk virtio_console button evdev pvpanic_mmio)
QGA=qemu-guest-agent

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# cached: an offline machine keeps using what an earlier run built.
cached() {
  if [ -f "$DIR/vmlinuz" ] && [ -f "$DIR/initramfs.gz" ]; then
    log "$1; using the kernel built before ($(cat "$DIR/kernel-version" 2>/dev/null || echo unknown))"
    echo "$DIR"
    exit 0
  fi
  die "$1"
}
for c in apt-get apt-cache dpkg-deb cpio gzip; do
  command -v "$c" >/dev/null || cached "$c is missing"
done
[ -x "$BUSYBOX" ] || cached "$BUSYBOX is missing (apt-get install busybox-static)"
[ "$(uname -m)" = x86_64 ] || die "only x86_64 hosts are supported ($META is amd64)"

# Serialise concurrent runs (tests of several packages may build at once),
# so that the second finds the first's result.
exec 9>"$DIR/.lock"
command -v flock >/dev/null && flock 9

# The versioned package the meta package depends on, e.g.
# linux-image-6.1.0-56-cloud-amd64: resolved from the local apt lists,
# which are refreshed once if they do not know the package.
resolve() { apt-cache depends "$META" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'; }
PKG=$(resolve || true)
if [ -z "$PKG" ]; then
  log "apt does not know $META; running apt-get update"
  apt-get update -qq >/dev/null 2>&1 || cached "apt-get update failed (offline?)"
  PKG=$(resolve || true)
  [ -n "$PKG" ] || cached "cannot resolve the kernel package $META depends on"
fi
KVER=${PKG#linux-image-}
VERSION=$(apt-cache policy "$PKG" | awk '$1 == "Candidate:" { print $2; exit }')
QGA_VERSION=$(apt-cache policy "$QGA" | awk '$1 == "Candidate:" { print $2; exit }')
[ -n "$QGA_VERSION" ] && [ "$QGA_VERSION" != "(none)" ] || cached "apt does not know $QGA"

STAMP=$DIR/stamp
want_stamp="$PKG $VERSION $QGA $QGA_VERSION $(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1) $(sha256sum "$BUSYBOX" | cut -d' ' -f1)"
if [ -f "$DIR/vmlinuz" ] && [ -f "$DIR/initramfs.gz" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want_stamp" ]; then
  echo "$DIR"
  exit 0
fi

WORK=$(mktemp -d "$DIR/.work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The package is kept in DIR/debs, so that a change of this script does
# not download it again.
DEBS=$DIR/debs
mkdir -p "$DEBS"
DEB=
for f in "$DEBS"/"$PKG"_*.deb; do
  [ -f "$f" ] && [ "$(dpkg-deb -f "$f" Version)" = "$VERSION" ] && DEB=$f
done
if [ -z "$DEB" ]; then
  log "downloading $PKG $VERSION"
  rm -f "$DEBS"/*.deb
  # apt's sandbox user cannot write to an arbitrary directory: download
  # as root (apt verifies the package all the same).
  (cd "$DEBS" && apt-get download -qq -o APT::Sandbox::User=root "$PKG=$VERSION") \
    || cached "apt-get download $PKG=$VERSION failed (offline?)"
  DEB=$(ls "$DEBS"/"$PKG"_*.deb)
fi
dpkg-deb -x "$DEB" "$WORK/pkg"

# The guest agent, kept in DIR/debs-qga (the kernel's directory is emptied
# when the kernel changes).
QGA_DEBS=$DIR/debs-qga
mkdir -p "$QGA_DEBS"
QGA_DEB=
for f in "$QGA_DEBS"/"$QGA"_*.deb; do
  [ -f "$f" ] && [ "$(dpkg-deb -f "$f" Version)" = "$QGA_VERSION" ] && QGA_DEB=$f
done
if [ -z "$QGA_DEB" ]; then
  log "downloading $QGA $QGA_VERSION"
  rm -f "$QGA_DEBS"/*.deb
  (cd "$QGA_DEBS" && apt-get download -qq -o APT::Sandbox::User=root "$QGA=$QGA_VERSION") \
    || cached "apt-get download $QGA=$QGA_VERSION failed (offline?)"
  QGA_DEB=$(ls "$QGA_DEBS"/"$QGA"_*.deb)
fi
dpkg-deb -x "$QGA_DEB" "$WORK/qga"
KERNEL=$WORK/pkg/boot/vmlinuz-$KVER
[ -f "$KERNEL" ] || die "$PKG holds no /boot/vmlinuz-$KVER"
MODDIR=$WORK/pkg/lib/modules/$KVER

# ---- initramfs ----
ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,lib/modules/"$KVER"}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$ROOT/bin/$applet"
done

# qemu-ga and the shared libraries it links, the host's copies (the
# host runs QEMU and libvirt, which link the same ones), at their paths.
cp "$WORK/qga/usr/sbin/qemu-ga" "$ROOT/bin/qemu-ga"
libs=$(ldd "$ROOT/bin/qemu-ga") || die "ldd qemu-ga failed"
if grep -q "not found" <<<"$libs"; then
  die "qemu-ga needs libraries this host lacks: $(grep "not found" <<<"$libs" | tr -s ' \t\n' ' ')"
fi
for lib in $(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs"); do
  mkdir -p "$ROOT$(dirname "$lib")"
  cp -L "$lib" "$ROOT$lib"
done

# The module files and, recursively, the modules they depend on (read from
# each module's own modinfo section, since the package has no modules.dep).
declare -A copied=()
add_module() {
  local name=$1 file dep
  [ -z "${copied[$name]:-}" ] || return 0
  copied[$name]=1
  if grep -qE "/${name//_/[_-]}\.ko$" "$MODDIR/modules.builtin" 2>/dev/null; then
    return 0 # built in: nothing to load
  fi
  file=$(find "$MODDIR/kernel" -regextype posix-extended -regex ".*/${name//_/[_-]}\.ko(\.xz|\.zst|\.gz)?" -print -quit)
  [ -n "$file" ] || die "module $name not found in $PKG"
  case $file in
    *.ko) ;;
    *) die "compressed module $file: unsupported (busybox insmod reads plain .ko)" ;;
  esac
  mkdir -p "$ROOT/lib/modules/$KVER/$(dirname "${file#"$MODDIR"/}")"
  cp "$file" "$ROOT/lib/modules/$KVER/${file#"$MODDIR"/}"
  for dep in $("$BUSYBOX" strings "$file" | sed -n 's/^depends=//p' | tr ',' ' '); do
    add_module "$dep"
  done
}
for m in "${MODULES[@]}"; do add_module "$m"; done
cp "$MODDIR/modules.builtin" "$MODDIR/modules.order" "$ROOT/lib/modules/$KVER/" 2>/dev/null || true
"$BUSYBOX" depmod -b "$ROOT" "$KVER" || die "depmod failed"

printf '%s\n' "${MODULES[@]}" >"$ROOT/etc/modules"

# The power button powers off (busybox acpid runs /etc/acpi/PWRF/*).
mkdir -p "$ROOT/etc/acpi/PWRF"
cat >"$ROOT/etc/acpi/PWRF/00000080" <<'EOF'
#!/bin/sh
echo "strata-vm: power button: powering off"
poweroff -f
EOF
chmod +x "$ROOT/etc/acpi/PWRF/00000080"

cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# Strata's test VM: configure the network from ip=, say so, stay up.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts

for m in $(cat /etc/modules); do
  modprobe "$m" 2>/dev/null || echo "strata-vm: modprobe $m failed"
done
# acpid opens the event devices there are when it starts: wait for the
# power button's (its driver binds asynchronously).
i=0
until grep -qs "Power Button" /sys/class/input/event*/device/name || [ $i -ge 50 ]; do
  sleep 0.1; i=$((i + 1))
done
acpid -c /etc/acpi -l /dev/console

ip link set lo up

# ip=<client-ip>:<server-ip>:<gw-ip>:<netmask>:<hostname>:<device>:<autoconf>
arg=
for word in $(cat /proc/cmdline); do
  case $word in ip=*) arg=${word#ip=} ;; esac
done
addr=-
if [ -n "$arg" ]; then
  IFS=: read -r addr server gw mask host dev auto <<ARGS
$arg
ARGS
  dev=${dev:-eth0}
  [ -n "$host" ] && hostname "$host"
  # The NIC's driver binds asynchronously: wait for it.
  i=0
  while [ ! -e "/sys/class/net/$dev" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  ip link set "$dev" up
  if ip -4 addr show dev "$dev" | grep -q "inet $addr/"; then
    echo "strata-vm: the kernel configured $dev"
  else
    prefix=$(ipcalc -p "$addr" "$mask" | sed -n 's/^PREFIX=//p')
    ip addr add "$addr/${prefix:-24}" dev "$dev"
    [ -n "$gw" ] && ip route add default via "$gw" dev "$dev"
  fi
fi
[ "$(hostname)" = "(none)" ] && hostname strata-vm
echo "strata-vm: disks: $(ls /sys/block | tr '\n' ' ')"
echo "strata-vm: ip addr:"
ip addr

# The provider's config drive (serial strata-config) is a tar archive:
# env, run, mounts and files/<n>/<key> (see
# providers/libvirt/configdrive.go). Each mount path gets a tmpfs with
# its files, remounted read-only; nothing of the content is printed.
drive=
exitdev=
for b in /sys/block/vd*; do
  case $(cat "$b/serial" 2>/dev/null) in
    strata-config) drive=/dev/${b##*/} ;;
    strata-exit) exitdev=/dev/${b##*/} ;;
  esac
done
if [ -n "$drive" ]; then
  mkdir -p /run/strata
  mount -t tmpfs -o mode=0700 tmpfs /run/strata
  if tar -x -f "$drive" -C /run/strata; then
    n=0
    while IFS= read -r dir; do
      [ -n "$dir" ] || continue
      mkdir -p "$dir"
      mount -t tmpfs -o mode=0755 tmpfs "$dir"
      tar -c -f - -C "/run/strata/files/$n" . | tar -x -f - -C "$dir"
      mount -o remount,ro "$dir"
      echo "strata-vm: mounted $(ls "$dir" | wc -l) file(s) read-only at $dir"
      n=$((n + 1))
    done <<MOUNTS
$(cat /run/strata/mounts 2>/dev/null)
MOUNTS
    rm -rf /run/strata/files
    # A failing . would end PID 1 (a kernel panic): check first.
    if [ -r /run/strata/env ]; then . /run/strata/env; fi
  else
    echo "strata-vm: the config drive $drive is unreadable"
  fi
fi
# The QEMU guest agent, on its channel when the domain has one (the
# port's driver binds asynchronously, as the NIC's).
if grep -qsx 0x0003 /sys/bus/virtio/devices/*/device; then
  i=0
  until ls /sys/class/virtio-ports/vport* >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
fi
for port in /sys/class/virtio-ports/vport*; do
  [ "$(cat "$port/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] || continue
  mkdir -p /var/run
  if qemu-ga -d -m virtio-serial -p "/dev/${port##*/}" -f /run/qemu-ga.pid; then
    echo "strata-vm: qemu guest agent on /dev/${port##*/}"
  else
    echo "strata-vm: qemu-ga failed"
  fi
done
echo "STRATA-VM-READY $(hostname) $addr"

case " $(cat /proc/cmdline) " in
  *" strata.panic "*)
    echo "strata-vm: panicking, as strata.panic asks"
    echo c >/proc/sysrq-trigger
    ;;
esac

# With a command (the drive's run), run it to its end, write its exit code
# on the exit disk (serial strata-exit), which the provider reports, and
# power off.
if [ -f /run/strata/run ]; then
  echo "strata-vm: running the command"
  sh /run/strata/run </dev/null
  code=$?
  echo "strata-vm: the command exited with code $code"
  if [ -n "$exitdev" ]; then
    printf 'STRATA-EXIT %d\n' "$code" | dd of="$exitdev" conv=fsync 2>/dev/null ||
      echo "strata-vm: writing the exit code failed"
  fi
  sync
  poweroff -f
fi

# PID 1 must not exit.
while :; do sleep 3600; done
EOF
chmod +x "$ROOT/init"

# Deterministic archive: sorted names, owned by root.
(cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -9 -n >"$WORK/initramfs.gz"

# Replace the outputs only once both are complete.
cp "$KERNEL" "$DIR/vmlinuz.new"
mv "$DIR/vmlinuz.new" "$DIR/vmlinuz"
mv "$WORK/initramfs.gz" "$DIR/initramfs.gz"
echo "$KVER" >"$DIR/kernel-version"
echo "$want_stamp" >"$STAMP"
log "built $DIR/vmlinuz ($KVER) and $DIR/initramfs.gz"
echo "$DIR"
