#!/usr/bin/env bash
# Builds a tiny OCI image archive from the host's static busybox, with no
# registry: the containerd provider's tests and `strata dev` import it
# (offline sites import archives the same way).
#
#   deploy/dev/images.sh [OUT_DIR [USER]]     # default .cache/images
#
# Writes OUT_DIR/busybox-oci.tar, an OCI image layout (oci-layout,
# index.json, blobs/sha256/...) whose one image is named
# docker.io/library/busybox:latest, and prints its path. It can be imported
# by hand with
#
#   ctr images import --base-name docker.io/library/busybox --digests OUT_DIR/busybox-oci.tar
#
# With USER (a name of the image's /etc/passwd, root or nobody, or
# UID[:GID]), the image's config says USER instead of nothing: it is
# OUT_DIR/busybox-user-USER-oci.tar (':' as '-'), named
# docker.io/library/busybox:user-USER, with the same layer.
#
# The build is deterministic (sorted entries, fixed times and owners,
# uncompressed layer), so the same busybox always gives the same digests,
# and it is skipped when the archive is up to date. Needs bash, coreutils
# and GNU tar; BUSYBOX overrides the binary (default /bin/busybox, from
# Debian's busybox-static).
set -euo pipefail

die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }

OUT_DIR=${1:-.cache/images}
IMAGE_USER=${2:-}
BUSYBOX=${BUSYBOX:-/bin/busybox}
NAME=docker.io/library/busybox:latest
BASE=busybox-oci.tar
USER_JSON=
if [ -n "$IMAGE_USER" ]; then
  [[ $IMAGE_USER =~ ^[a-z0-9_]+(:[a-z0-9_]+)?$ ]] || die "USER $IMAGE_USER is not a name or UID[:GID]"
  NAME=docker.io/library/busybox:user-${IMAGE_USER//:/-}
  BASE=busybox-user-${IMAGE_USER//:/-}-oci.tar
  USER_JSON=",\"User\":\"$IMAGE_USER\""
fi
[ -x "$BUSYBOX" ] || die "$BUSYBOX is missing (apt-get install busybox-static)"
# A dynamically linked busybox would not run in an image without libc.
if command -v file >/dev/null && ! file -L "$BUSYBOX" | grep -q 'statically linked'; then
  die "$BUSYBOX is not statically linked (install busybox-static)"
fi
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar is required"

case $(uname -m) in
  x86_64) ARCH=amd64 ;;
  aarch64) ARCH=arm64 ;;
  armv7l) ARCH=arm ;;
  ppc64le) ARCH=ppc64le ;;
  s390x) ARCH=s390x ;;
  riscv64) ARCH=riscv64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
OUT=$OUT_DIR/$BASE
STAMP=$OUT.stamp

# Up to date when neither busybox nor this script changed since the last
# build: the stamp holds both digests.
want_stamp="$(sha256sum "$BUSYBOX" | cut -d' ' -f1) $(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1) $ARCH"
if [ -f "$OUT" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]; then
  echo "$OUT"
  exit 0
fi

# Tests build the archive concurrently (one per package); serialise them
# so that the second finds the first's result.
exec 9>"$OUT_DIR/.$BASE.lock"
if command -v flock >/dev/null; then
  flock 9
  if [ -f "$OUT" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]; then
    echo "$OUT"
    exit 0
  fi
fi

work=$(mktemp -d "$OUT_DIR/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 022

# ---- rootfs ----
root=$work/rootfs
mkdir -p "$root"/{bin,dev,etc,proc,root,sys,tmp,var/www,www}
cp "$BUSYBOX" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
# Every applet this busybox has (sh, httpd, wget, hostname, cat, echo,
# sleep, ip, ifconfig, mkdir, ls, dd, head, tr, ...), as a symlink.
"$BUSYBOX" --list | LC_ALL=C sort | while read -r applet; do
  case $applet in busybox | */* | "") continue ;; esac
  ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
: >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
chmod 0644 "$root"/etc/*
chmod 1777 "$root/tmp"
chmod 0700 "$root/root"
find "$root" -type d ! -path "$root/tmp" ! -path "$root/root" -exec chmod 0755 {} +

# deterministic_tar OUT DIR ENTRY...: a tar whose bytes depend only on the
# files' contents, names and modes.
deterministic_tar() {
  local out=$1 dir=$2
  shift 2
  tar --sort=name --format=gnu --mtime=@0 --owner=0 --group=0 --numeric-owner \
    --no-acls --no-xattrs --no-selinux -C "$dir" -cf "$out" "$@"
}

# ---- OCI layout ----
layout=$work/layout
blobs=$layout/blobs/sha256
mkdir -p "$blobs"

# put FILE: moves FILE into the blobs, prints "digest size".
put() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$blobs/$d"
  echo "$d $s"
}

# Uncompressed on purpose: deterministic without depending on gzip's
# version, and the diff ID is the layer digest.
deterministic_tar "$work/layer.tar" "$root" bin dev etc proc root sys tmp var www
read -r layer_digest layer_size < <(put "$work/layer.tar")

printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"],"WorkingDir":"/"%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"deploy/dev/images.sh (busybox-static)"}]}' \
  "$ARCH" "$USER_JSON" "$layer_digest" >"$work/config.json"
read -r config_digest config_size < <(put "$work/config.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
read -r manifest_digest manifest_size < <(put "$work/manifest.json")

# io.containerd.image.name names the image on a plain import; ref.name
# (the tag, "latest") is what `ctr images import --base-name` prefixes.
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$ARCH" "$NAME" "${NAME##*:}" >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
chmod 0644 "$layout/index.json" "$layout/oci-layout" "$blobs"/*
chmod 0755 "$layout" "$layout/blobs" "$blobs"

deterministic_tar "$work/$BASE" "$layout" oci-layout index.json blobs
chmod 0644 "$work/$BASE"
mv -f "$work/$BASE" "$OUT"
echo "$want_stamp" >"$STAMP"
echo "$OUT"
